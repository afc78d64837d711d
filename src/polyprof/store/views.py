"""``store sql``: one read-only query over the store's views, and the derived ``stacks`` view.

Views: ``profiles``, ``samples`` (with its ``day`` partition column),
``callsites``, ``frames``, ``functions``, ``mappings``, ``labelsets`` (one per
dataset), ``rollup`` (samples summed by profile, stack and ts: ``pos`` and
``neg`` sums, see :mod:`polyprof.store.layout`), and ``stacks``: one row per callsite with ``depth`` and
``frames``, the list of its frames' names, leaf first. A frame's name is
its innermost function (inlined chains show their innermost function), or
``<mapping file>+0x<address>`` for an address-only frame. ``stacks`` walks
the callsite tree with a recursive query, so it costs a pass over every
callsite: join it with aggregated samples, not with raw ones.

    SELECT st.frames[1] AS leaf, sum(s.value) AS v
    FROM samples s JOIN stacks st ON st.callsite_id = s.callsite_id
    WHERE s.sample_type = 'cpu' GROUP BY 1 ORDER BY v DESC LIMIT 10
"""

from __future__ import annotations

from typing import Any

from polyprof.store.where import check_query

__all__ = ["STACKS_SQL", "define_views", "run_sql"]

STACKS_SQL = """\
WITH RECURSIVE walk(callsite_id, node, pos) AS (
  SELECT id, id, 0 FROM callsites
  UNION ALL
  SELECT w.callsite_id, c.parent, w.pos + 1 FROM walk AS w JOIN callsites AS c ON c.id = w.node
  WHERE c.parent <> 0
), named AS (
  SELECT w.callsite_id, w.pos,
         COALESCE(fn.name, m.filename || '+0x' || LOWER(HEX(f.address)), '0x' || LOWER(HEX(f.address))) AS name
  FROM walk AS w JOIN callsites AS c ON c.id = w.node JOIN frames AS f ON f.id = c.frame
  LEFT JOIN functions AS fn ON fn.id = f.lines[1].function LEFT JOIN mappings AS m ON m.id = f.mapping
)
SELECT callsite_id, COUNT(*) AS depth,
       LIST_TRANSFORM(LIST_SORT(LIST(STRUCT_PACK(pos := pos, name := name))), lambda x: x.name) AS frames
FROM named GROUP BY callsite_id"""


def define_views(engine: Any) -> None:
    """Define the derived views on an engine whose dataset views are attached."""
    engine.define("stacks", STACKS_SQL)


def run_sql(engine: Any, text: str) -> Any:
    """Check ``text`` (one read-only query over the views) and run it: an Arrow table."""
    return engine.query(check_query(text))
