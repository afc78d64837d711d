"""Profile.extras: the keys code relies on are typed properties, stored as plain JSON."""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
from pathlib import Path

import polyprof
from polyprof.model.builder import ProfileBuilder
from polyprof.model.extras import Extras, LostSituation, ThreadRecord, _Counts
from polyprof.model.profile import Label, Profile
from polyprof.model.threads import listed_threads, sample_threads

SRC = Path(polyprof.__file__).resolve().parent
DECLARED = [name for name, v in vars(Extras).items() if isinstance(v, (property, _Counts))]


def test_declared_keys_are_stored_as_json_and_read_back_typed():
    x = Extras()
    x.profile_labels = {"pid": 7, "heap": "malloc"}
    x.threads = [ThreadRecord(11, 7, "ui"), ThreadRecord(12, None, None)]
    x.lost_situation = LostSituation(90, 10)
    x.kernel_records_lost = {"0": 3, "2": 4}
    x.samples_skipped = {"b": 2, "a": 1}
    stored = json.loads(json.dumps(x))
    assert stored["threads"] == [[11, 7, "ui"], [12, None, None]]
    assert stored["lost_situation"] == {"sample_count": 90, "lost_count": 10}
    assert list(stored["samples_skipped"]) == ["a", "b"]
    back = Extras(stored)
    assert back.profile_labels == {"pid": 7, "heap": "malloc"}
    assert back.threads == [ThreadRecord(11, 7, "ui"), ThreadRecord(12, None, None)]
    assert back.lost_situation == LostSituation(90, 10)
    assert back.kernel_records_lost == {"0": 3, "2": 4}
    assert back.unwind_errors == {} and back.lost_samples is None and back.truncated_stacks is None


def test_thread_tables_in_every_accepted_shape():
    x = Extras(threads={"11": {"name": "ui", "pid": 7}, "12": "worker"}, thread_names={"12": "renamed", "13": "bg"},
               process_names={"7": "app"})
    assert x.threads == [ThreadRecord(11, 7, "ui"), ThreadRecord(12, None, "renamed"), ThreadRecord(13, None, "bg")]
    assert x.process_names == {7: "app"}
    assert Extras(threads=[{"tid": 5, "pid": 1, "thread_name": "t"}, "junk", [6]]).threads == [ThreadRecord(5, 1, "t")]


def test_profiles_always_hold_typed_extras():
    p = Profile(extras={"profile_labels": {"pid": 1}})
    assert isinstance(p.extras, Extras) and p.extras.profile_labels == {"pid": 1}
    q = dataclasses.replace(p, extras=dict(p.extras))
    assert isinstance(q.extras, Extras)
    r = p.copy_with(period=5)
    r.extras["x"] = 1
    assert "x" not in p.extras and r.period == 5 and r.samples is p.samples
    assert isinstance(pickle.loads(pickle.dumps(p)).extras, Extras)


def test_thread_identity_from_labels_columns_and_the_table():
    b = ProfileBuilder("test")
    b.set_sample_types([("samples", "count")])
    stack = b.stack([b.frame("f")])
    b.add_sample(stack, [1], tid=11, pid=7)
    b.add_sample(stack, [1], tid=12, pid=7, labels=[Label("thread_name", str="worker")])
    b.add_sample(stack, [1], tid=11, pid=7)
    b.meta.extras.threads = [ThreadRecord(11, 7, "ui"), ThreadRecord(99, 7, "idle")]
    b.meta.extras["process_names"] = {"7": "app"}
    p = b.finish()
    thread_of, infos = sample_threads(p)
    assert thread_of.tolist() == [0, 1, 0]
    assert [(t.name, t.pid, t.tid, t.process_name) for t in infos] == [("ui", 7, 11, "app"), ("worker", 7, 12, "app")]
    assert [(t.name, t.tid) for t in listed_threads(p)] == [("ui", 11), ("idle", 99)]


def test_declared_keys_are_not_read_by_string_outside_the_model():
    """Code reads the declared keys through the properties (one place knows the key and its type)."""
    pattern = re.compile(r"extras(?:\.get\(|\.setdefault\(|\[)\s*[\"'](" + "|".join(DECLARED) + r")[\"']")
    offenders = [f"{path.relative_to(SRC)}:{i}" for path in sorted(SRC.rglob("*.py")) if path.name != "extras.py"
                 for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not offenders, offenders
    assert {"profile_labels", "threads", "lost_situation", "kernel_records_lost", "samples_skipped"} <= set(DECLARED)
