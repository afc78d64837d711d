"""The columnar profile model: tables, the builder, the validity check, the dump."""

from polyprof.model.builder import ProfileBuilder
from polyprof.model.dump import dump
from polyprof.model.profile import Label, Profile, ValueType
from polyprof.model.validate import check

__all__ = ["Label", "Profile", "ProfileBuilder", "ValueType", "check", "dump"]
