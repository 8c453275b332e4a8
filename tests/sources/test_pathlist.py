"""PathList: a dataset's paths kept as one packed blob read exactly like the list it replaces (any slice, any
index, pickling, equality, hashing), across the encoding chunks and with its refusals."""

import os
import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import InputError
from consumer.dataset.cache import file_table_sha256
from consumer.sources.paths import _CHUNK, PathList
from consumer.util.fileio import pack_paths, unpack_paths

_paths = st.lists(st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)))
                  | st.sampled_from(["/a/\udcff.bin", "", "/é/ü"]), max_size=40)


@settings(max_examples=200, deadline=None)
@given(_paths, st.integers(-45, 45), st.integers(-45, 45), st.sampled_from([1, 1, 2, 3, -1]))
def test_pathlist_reads_like_the_list(paths, a, b, step):
    pl = PathList.of(paths)
    assert len(pl) == len(paths) and list(pl) == paths and pl == paths and paths == pl and pl == tuple(paths)
    assert [pl[i] for i in range(-len(paths), len(paths))] == [paths[i] for i in range(-len(paths), len(paths))]
    assert list(pl[a:b:step]) == paths[a:b:step] and pl[a:b:step] == paths[a:b:step]
    assert pickle.loads(pickle.dumps(pl)) == pl and pickle.loads(pickle.dumps(pl[a:b])) == paths[a:b]
    if paths:
        assert np.array_equal(pl.packed(), pack_paths(paths)) and PathList.from_blob(pack_paths(paths)) == paths
        assert unpack_paths(pl.packed()) == paths
        assert file_table_sha256(pl, np.zeros(len(paths)), np.zeros(len(paths)), np.zeros(len(paths))) == \
            file_table_sha256(paths, np.zeros(len(paths)), np.zeros(len(paths)), np.zeros(len(paths)))
    cut = len(paths) // 2
    assert PathList.concat([paths[:cut], paths[cut:]]) == pl and hash(PathList.of(list(paths))) == hash(pl)
    joined = pl[:cut].joined(pl[cut:])
    assert joined is not None and joined == paths and pl[cut:].joined(pl[:cut]) is None or cut == 0
    assert pl != [*paths, "x"] and (pl == 3) is False
    ids = np.arange(len(paths))[::-1]
    assert pl.take(ids) == paths[::-1] and pl.take(ids, raw=True) == [os.fsencode(p) for p in paths[::-1]]
    assert pl[cut:].take(np.arange(len(paths) - cut)) == paths[cut:]
    assert pl[:cut] + pl[cut:] == paths and paths[:cut] + pl[cut:] == paths and pl[:cut] + tuple(paths[cut:]) == paths
    copied = pl.copy()
    assert type(copied) is list and copied == paths and pl.count(paths[0] if paths else "") == paths.count(
        paths[0] if paths else "")


def test_pathlist_across_chunks_and_out_of_range():
    paths = [f"/d{i % 7}/f{i}" + ("é" if i % 5 == 0 else "") for i in range(_CHUNK + 1234)]
    pl = PathList.of(paths)
    assert list(pl) == paths and pl[_CHUNK] == paths[_CHUNK] and pl[-1] == paths[-1]
    assert list(pl[_CHUNK - 3:_CHUNK + 3]) == paths[_CHUNK - 3:_CHUNK + 3]
    assert PathList.from_blob(pl.packed()) == pl
    for bad in (len(paths), -len(paths) - 1):
        try:
            pl[bad]
        except IndexError as e:
            assert str(len(paths)) in str(e)
        else:
            raise AssertionError("no IndexError")


def test_pathlist_refuses_a_nul_byte():
    try:
        PathList.of(["/a", "/b\0c"])
    except InputError as e:
        assert "NUL" in str(e) and "/b" in str(e)
    else:
        raise AssertionError("no InputError")
