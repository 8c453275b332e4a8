import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import InputError, Vocab, decode_ids, encode_bytes
from consumer.tokens.vocab import bytes_to_ids, n_content_tokens


@pytest.mark.parametrize("nb, size", [(1, 256 + 5), (2, 65536 + 6), (3, 256 ** 3 + 7)])
def test_vocab_layout(nb, size):
    v = Vocab(nb)
    assert v.eof == 256 ** nb  # gperc's EOF id
    assert [v.eof, v.pad, v.mask, v.cls, v.sep] == list(range(256 ** nb, 256 ** nb + 5))
    assert v.size == size
    specials = v.specials
    assert min(specials.values()) == 256 ** nb and max(specials.values()) == v.size - 1
    assert len(set(specials.values())) == len(specials)
    assert v.to_dict()["specials"] == specials


@pytest.mark.parametrize("bad", [0, 4, -1, 2.0, "2", True, None])
def test_bad_n_bytes(bad):
    with pytest.raises(InputError, match="n_bytes must be one of"):
        Vocab(bad)


def test_big_endian_ids_match_gperc():
    v = Vocab(2)
    assert encode_bytes(b"\x01\x00\x00\x01", v).tolist() == [256, 1]
    assert encode_bytes(b"\x01\x02\x03", Vocab(3)).tolist() == [0x010203]


def test_tail_encoding():
    v = Vocab(3)
    toks = encode_bytes(b"abcde", v)
    assert toks.tolist() == [0x616263, v.tail(2), 0x646500]
    assert n_content_tokens(5, 3) == 3
    assert n_content_tokens(np.array([0, 1, 3, 4]), 3).tolist() == [0, 2, 1, 3]


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64), nb=st.sampled_from([1, 2, 3]))
def test_round_trip(data, nb):
    v = Vocab(nb)
    toks = encode_bytes(data, v)
    assert toks.dtype == np.int64
    assert ((toks >= 0) & (toks < v.size)).all()
    assert decode_ids(toks, v) == data
    assert v.decode(torch.from_numpy(toks)) == data  # tensors accepted
    assert decode_ids(toks.tolist(), v) == data      # lists accepted


def test_specials_skipped_or_tagged():
    v = Vocab(2)
    ids = [v.cls, *encode_bytes(b"hi!", v).tolist(), v.eof, v.pad, v.pad]
    assert decode_ids(ids, v) == b"hi!"
    assert decode_ids(ids, v, specials="tags") == b"<CLS>hi<TAIL1>!<EOF><PAD><PAD>"


def test_decode_errors():
    v = Vocab(1)
    with pytest.raises(InputError, match="outside"):
        decode_ids([0, v.size], v)
    with pytest.raises(InputError, match="specials must be one of"):
        decode_ids([0], v, specials="keep")
    with pytest.raises(InputError, match="vocab must be"):
        decode_ids([0], 2)


def test_n_bytes_3_builds_no_table():
    import tracemalloc
    tracemalloc.start()
    v = Vocab(3)
    decode_ids(encode_bytes(bytes(range(256)) * 4, v), v)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1_000_000  # gperc built a 2.8 GB dict here


def test_bytes_to_ids_views():
    buf = np.frombuffer(b"\x00\x01\x02\x03", dtype=np.uint8)
    assert bytes_to_ids(buf, 2).tolist() == [1, 0x0203]
    with pytest.raises(InputError, match="multiple of n_bytes"):
        bytes_to_ids(buf[:3], 2)
