"""Assertions shared by several test files."""
import grit


def assert_same_array(a, b):
    """b is a GritArray with a's descriptor bytes (note included), shape, plane
    bytes, gid and digest."""
    assert isinstance(b, grit.GritArray)
    assert a.descriptor.to_bytes() == b.descriptor.to_bytes()
    assert a.shape == b.shape
    assert [bytes(p) for p in a.planes] == [bytes(p) for p in b.planes]
    assert a.gid == b.gid and a.digest == b.digest
