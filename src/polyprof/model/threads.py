"""Thread identity: which thread every sample ran on, and what is known of it.

A sample's thread comes from the ``pid``/``tid`` sample columns, else from
numeric ``pid``/``tid`` labels, and its name from a ``thread_name``,
``thread`` or ``comm`` label; the reader's thread table
(:attr:`polyprof.model.extras.Extras.threads`, ``process_names``) fills in
names and pids the samples do not carry, and lists threads without samples.
Used by the thread filters (``--thread``) and by the viewer writers, which
group samples by thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from polyprof.model.columns import factorize_rows
from polyprof.model.profile import Profile

__all__ = ["NAME_LABELS", "THREAD_LABELS", "ThreadInfo", "listed_threads", "sample_threads"]

#: Label keys that name a sample's thread (the first one present wins).
NAME_LABELS = ("thread_name", "thread", "comm")
#: Labels that only say which thread a sample ran on.
THREAD_LABELS = frozenset(NAME_LABELS) | {"pid", "tid"}


@dataclass(frozen=True)
class ThreadInfo:
    """A thread as viewers show it; fields are None when the profile does not say."""

    name: str | None
    pid: int | None
    tid: int | None
    process_name: str | None = None

    def label(self) -> str:
        """``name (tid N)``-style text for profile names."""
        parts = [self.name or ("thread" if self.tid is not None else "all samples")]
        if self.tid is not None:
            parts.append(f"(tid {self.tid})")
        return " ".join(parts)


def listed_threads(p: Profile) -> list[ThreadInfo]:
    """Every thread of the reader's thread table (also those without samples)."""
    processes = p.extras.process_names
    return [ThreadInfo(t.name, t.pid, t.tid, processes.get(t.pid) if t.pid is not None else None)
            for t in p.extras.threads]


def _labelset_columns(p: Profile) -> tuple[list[str | None], np.ndarray, np.ndarray]:
    """Per labelset: thread name, numeric pid and tid labels (-1 when absent)."""
    names: list[str | None] = []
    pids = np.full(len(p.labelsets), -1, dtype=np.int64)
    tids = np.full(len(p.labelsets), -1, dtype=np.int64)
    for i, labels in enumerate(p.labelsets):
        name = None
        for lab in labels:
            if lab.key in NAME_LABELS and lab.str and name is None:
                name = lab.str
            elif lab.key == "pid" and lab.num is not None:
                pids[i] = lab.num
            elif lab.key == "tid" and lab.num is not None:
                tids[i] = lab.num
        names.append(name)
    return names, pids, tids


#: Samples per step of :func:`sample_threads` (its temporaries are a few copies of one step,
#: not of the whole sample table: the timeline's warm-up runs it on millions of samples).
_STEP = 1 << 19


def sample_threads(p: Profile) -> tuple[np.ndarray, list[ThreadInfo]]:
    """(thread index of every sample, the threads), ordered by first appearance.

    A profile without any thread information gives one ThreadInfo whose
    fields are all None.
    """
    s = p.samples
    n = len(s)
    ls_names, ls_pids, ls_tids = _labelset_columns(p)
    name_ids = {nm: i for i, nm in enumerate(dict.fromkeys(x for x in ls_names if x))}
    ls_name_id = np.array([name_ids.get(x, -1) if x else -1 for x in ls_names], dtype=np.int64)
    inverse = np.zeros(n, dtype=np.int32)  # (threads are fewer than 2**31: half the memory per sample)
    uniq = np.zeros((3, 0), dtype=np.int64)  # the (pid, tid, name) of each thread so far, in order
    for lo in range(0, n, _STEP):  # numbered step by step: new threads of a step follow the older ones
        ls = s.labelset[lo:lo + _STEP]
        cols = [(s.pid[lo:lo + _STEP] if s.pid is not None else ls_pids[ls]).astype(np.int64, copy=False),
                (s.tid[lo:lo + _STEP] if s.tid is not None else ls_tids[ls]).astype(np.int64, copy=False),
                ls_name_id[ls]]
        ids, first = factorize_rows(cols, in_order=True)  # np.unique(axis=0) is 30x slower
        step = np.stack([c[first] for c in cols])
        old = uniq.shape[1]
        if old:  # the step's threads among the known ones: known rows come first, so keep their ids
            both, _ = factorize_rows(list(np.concatenate([uniq, step], axis=1)), in_order=True)
            to_global = both[old:]
            uniq = np.concatenate([uniq, step[:, to_global >= old]], axis=1)
        else:
            to_global, uniq = np.arange(first.size), step
        inverse[lo:lo + _STEP] = to_global[ids]
    table = {t.tid: t for t in p.extras.threads}
    processes = p.extras.process_names
    id_names = list(name_ids)
    infos = []
    for u in uniq.T.tolist():
        upid, utid, uname = (None if u[0] < 0 else u[0]), (None if u[1] < 0 else u[1]), u[2]
        listed = table.get(utid) if utid is not None else None
        ename, epid = (listed.name, listed.pid) if listed is not None else (None, None)
        upid = upid if upid is not None else epid
        name = id_names[uname] if uname >= 0 else ename
        infos.append(ThreadInfo(name, upid, utid, processes.get(upid) if upid is not None else None))
    if not infos:
        infos = [ThreadInfo(None, None, None)]
    return inverse, infos
