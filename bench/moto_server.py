"""moto's server for bench/verify.rs, with one change: ListObjectVersions without a deep copy.

moto 5.2's S3Backend.list_object_versions begins with `copy.deepcopy` of every version of every
key in the bucket (to set `is_latest` on the copies). A FakeKey's deep copy goes through its
pickling hooks: it reads the whole body, writes it into a new buffer and re-hashes it, and
moto's BaseModel.__new__ appends the copy to the class's `instances_tracked`, which is never
emptied. So every listing costs O(the bucket's bytes) and keeps a full copy of the bucket for good:
at 1,000 objects of about 108 KB, the sealer's and `verify`'s listings (four a period) took
moto's server past 24 GB until the kernel's OOM killer stopped it. S3's own listing reads no body.

Here the copies are shallow views (the same attributes, the body's buffer shared, not tracked, never
closing that buffer when collected), which is all the function needs: it sets `is_latest` on them and renders names, version ids,
sizes, ETags and times. Every other request is moto's, unchanged. Run as `moto_server`:

    .venv/bin/python bench/moto_server.py -H 127.0.0.1 -p PORT
"""

import copy
import sys
import types

from moto.s3 import models
from moto.server import main


_VIEW_CLASSES = {}


def _view(version):
    """A shallow copy of a FakeKey or FakeDeleteMarker: no body copy, not tracked, and of a
    subclass whose __del__ does nothing (FakeKey's closes the body's buffer, here the original's)."""
    kind = type(version)
    if kind not in _VIEW_CLASSES:
        _VIEW_CLASSES[kind] = type(kind.__name__, (kind,), {"__del__": lambda self: None, "__module__": kind.__module__})
    view = object.__new__(_VIEW_CLASSES[kind])
    view.__dict__.update(version.__dict__)
    return view


def _deepcopy(value, memo=None):
    if isinstance(value, list) and all(isinstance(v, (models.FakeKey, models.FakeDeleteMarker)) for v in value):
        return [_view(v) for v in value]
    return copy.deepcopy(value, memo)


# models.py calls `copy.deepcopy` (the listing) and `copy.copy` (of a body's bytes) only.
models.copy = types.SimpleNamespace(copy=copy.copy, deepcopy=_deepcopy)

if __name__ == "__main__":
    sys.exit(main())
