"""T5 / ByT5 span corruption (consumer.fetch.spans): T5's counts and length helper, the golden layout, exact
rebuild of every row, sentinels apart from data ids, reproducibility, uniform masks, refusals."""

import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import InputError, QueryError
from consumer.fetch.spans import (
    IGNORE_INDEX,
    compute_input_and_target_lengths,
    encode_mask,
    max_spans,
    noise_counts,
    random_spans_noise_mask,
    span_corrupt,
)
from consumer.tokens.vocab import Vocab

from ..helpers.spans import rebuild

VOCAB = Vocab(1)
N_DATA, EOS, PAD = VOCAB.n_data, VOCAB.eof, VOCAB.pad  # data ids 0..255, then specials (EOF as EOS, PAD)
FIRST_FREE = VOCAB.size                                # 261: the smallest id no data/special uses
TOP, N_SENT = 400, 100            # sentinels 301..400


def t5_counts(n: int, density: float, mean: float) -> tuple[int, int]:
    """T5's counts written out plainly (Python's round is half-to-even, as T5's), spans capped where T5 would
    need empty spans (more spans than noise or non-noise tokens)."""
    if n < 2:
        return 0, 0
    noise = min(max(round(n * density), 1), n - 1)
    return noise, min(max(round(noise / mean), 1), noise, n - noise)


@given(st.integers(2, 5000), st.floats(0.001, 0.499), st.floats(1.0, 100.0))
def test_the_cap_never_binds_below_density_half_with_spans_of_at_least_one_token(n, density, mean):
    noise = min(max(round(n * density), 1), n - 1)
    assert max(round(noise / mean), 1) <= min(noise, n - noise)


def runs(mask: np.ndarray) -> int:
    """Number of runs of True."""
    return int((mask & ~np.concatenate([[False], mask[:-1]])).sum())


def corrupt(tokens, row, col, n, seed=0, density=0.15, mean=3.0, **kw):
    args = dict(noise_density=density, mean_span=mean, sentinel_top=TOP, n_sentinels=N_SENT,
                first_free_id=FIRST_FREE, eos=EOS, pad=PAD)
    args.update(kw)
    return span_corrupt(tokens, row, col, n, np.random.default_rng(seed), **args)


@st.composite
def batches(draw):
    """A [B, L] batch of data ids with pieces laid end to end from column 0 (PAD after), as flat piece arrays."""
    b, width = draw(st.integers(1, 4)), draw(st.integers(1, 80))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    tokens = np.full((b, width), PAD, dtype=np.int64)
    rows, cols, lens = [], [], []
    for r in range(b):
        at = 0
        for n in draw(st.lists(st.integers(0, width), max_size=4)):
            n = min(n, width - at)
            tokens[r, at:at + n] = rng.integers(0, N_DATA, n)
            rows.append(r), cols.append(at), lens.append(n)
            at += n
    arr = [np.array(v, dtype=np.int64) for v in (rows, cols, lens)]
    return tokens, *arr


# --- T5's arithmetic --------------------------------------------------------------------------------------------

def test_compute_input_and_target_lengths_gives_t5s_numbers():
    assert compute_input_and_target_lengths(512, 0.15, 3.0) == (568, 114)   # T5's default (HF's run_t5_mlm_flax)
    assert compute_input_and_target_lengths(1024, 0.15, 20.0) == (1193, 189)  # ByT5
    # T5's hack at noise_density == 0.5: targets 513 > inputs 512 at 767 tokens, so one token off both
    assert compute_input_and_target_lengths(512, 0.5, 3.0) == (766, 512)


@pytest.mark.parametrize("inputs_length", [62, 63, 100, 128, 512, 1000, 1024, 2048, 4096])
def test_a_piece_of_tokens_length_gives_inputs_length_and_targets_length(inputs_length):
    tokens_length, targets_length = compute_input_and_target_lengths(inputs_length, 0.15, 20.0)
    tokens = np.arange(tokens_length, dtype=np.int64)[None] % N_DATA
    out = corrupt(tokens, [0], [0], [tokens_length], density=0.15, mean=20.0)
    assert out.input_lengths.tolist() == [inputs_length] and out.inputs.shape == (1, inputs_length)
    assert out.label_lengths.tolist() == [targets_length] and out.labels.shape == (1, targets_length)


def test_t5s_length_contract_holds_for_every_bytet5_length_from_62():
    for inputs_length in range(62, 3000):
        t, target = compute_input_and_target_lengths(inputs_length, 0.15, 20.0)
        noise, spans = (int(c[0]) for c in noise_counts(np.array([t]), 0.15, 20.0))
        assert (t - noise + spans + 1, noise + spans + 1) == (inputs_length, target)
    # T5's quirk: below that its helper counts round(noise / 20) == 0 spans where the mask has 1
    t, target = compute_input_and_target_lengths(61, 0.15, 20.0)
    assert (t, target) == (70, 11) and t5_counts(70, 0.15, 20.0) == (10, 1)


@given(st.integers(0, 5000), st.sampled_from([0.05, 0.15, 0.3, 0.5]), st.sampled_from([1.0, 2.5, 3.0, 20.0]))
def test_noise_counts_are_t5s_and_max_spans_bounds_every_shorter_piece(n, density, mean):
    noise, spans = noise_counts(np.array([n]), density, mean)
    assert (int(noise[0]), int(spans[0])) == t5_counts(n, density, mean)
    all_spans = noise_counts(np.arange(n + 1), density, mean)[1]
    assert max_spans(n, density, mean) == int(all_spans.max())


def test_spans_are_capped_where_t5_would_need_empty_nonnoise_spans():
    noise, spans = noise_counts(np.array([10]), 0.9, 1.0)  # T5: 9 noise spans, 1 non-noise token
    assert (int(noise[0]), int(spans[0])) == (9, 1)
    mask = random_spans_noise_mask(10, 0.9, 1.0, np.random.default_rng(0))
    assert mask.tolist() == [False] + [True] * 9


@given(st.integers(0, 3000), st.sampled_from([0.05, 0.15, 0.5]), st.sampled_from([1.0, 3.0, 20.0]),
       st.integers(0, 2**32 - 1))
def test_reference_mask_follows_t5s_rule(n, density, mean, seed):
    mask = random_spans_noise_mask(n, density, mean, np.random.default_rng(seed))
    noise, spans = t5_counts(n, density, mean)
    assert mask.shape == (n,) and mask.dtype == bool
    assert int(mask.sum()) == noise and runs(mask) == spans
    if n >= 2:
        assert runs(~mask) == spans and not mask[0] and mask[-1]  # non-noise first, noise last


# --- layout ------------------------------------------------------------------------------------------------------

def test_golden_example_with_a_given_mask():
    tokens = np.full((3, 10), PAD, dtype=np.int64)
    tokens[0, :8] = [10, 11, 12, 13, 14, 15, 16, 17]  # two pieces: 10..14 and 15..17
    tokens[1, 0] = 20                                 # one piece of one token; row 2 has no piece
    noise = np.zeros((3, 10), dtype=bool)
    noise[0, [1, 2, 4, 6]] = True
    out = encode_mask(tokens, np.array([0, 0, 1]), np.array([0, 5, 0]), np.array([5, 3, 1]), noise,
                      sentinel_top=300, n_sentinels=2, eos=EOS, pad=PAD)
    assert out.inputs.tolist() == [[10, 300, 13, 299, 15, 300, 17, EOS],
                                   [20, EOS] + [PAD] * 6,
                                   [PAD] * 8]
    assert out.labels.tolist() == [[300, 11, 12, 299, 14, 300, 16, EOS],
                                   [EOS] + [IGNORE_INDEX] * 7,
                                   [IGNORE_INDEX] * 8]
    assert out.input_lengths.tolist() == [8, 2, 0] and out.label_lengths.tolist() == [8, 1, 0]
    rows = rebuild(out.inputs, out.labels, out.input_lengths, out.label_lengths, sentinel_top=300, n_sentinels=2)
    assert [r.tolist() for r in rows] == [[10, 11, 12, 13, 14, 15, 16, 17], [20], []]
    with pytest.raises(QueryError, match="n_sentinels=1 is too few"):
        encode_mask(tokens, np.array([0, 0, 1]), np.array([0, 5, 0]), np.array([5, 3, 1]), noise,
                    sentinel_top=300, n_sentinels=1, eos=EOS, pad=PAD)


@settings(max_examples=200, deadline=None)
@given(batches(), st.sampled_from([(0.15, 20.0), (0.15, 3.0), (0.5, 1.0), (0.3, 2.0)]), st.integers(0, 2**16))
def test_inputs_and_labels_rebuild_every_row_and_counts_are_t5s(batch, setting, seed):
    tokens, row, col, n = batch
    density, mean = setting
    out = corrupt(tokens, row, col, n, seed=seed, density=density, mean=mean)
    rows = rebuild(out.inputs, out.labels, out.input_lengths, out.label_lengths, sentinel_top=TOP,
                   n_sentinels=N_SENT)
    for r, got in enumerate(rows):
        want = [tokens[r, c:c + k] for c, k in zip(col[row == r], n[row == r])]
        assert got.tolist() == (np.concatenate(want).tolist() if want else [])
    assert not out.noise[tokens == PAD].any()
    for i in range(row.size):
        mask = out.noise[row[i], col[i]:col[i] + n[i]]
        noise, spans = t5_counts(int(n[i]), density, mean)
        assert int(mask.sum()) == noise and runs(mask) == spans
        if n[i] >= 2:
            assert runs(~mask) == spans and not mask[0] and mask[-1]
    has = np.bincount(row, minlength=tokens.shape[0]) > 0
    for r in range(tokens.shape[0]):
        li, lt = int(out.input_lengths[r]), int(out.label_lengths[r])
        assert (out.inputs[r, li:] == PAD).all() and (out.labels[r, lt:] == IGNORE_INDEX).all()
        assert (li > 0) == has[r] and (not has[r] or out.inputs[r, li - 1] == out.labels[r, lt - 1] == EOS)
        # sentinels restart per piece: the k-th span of each piece is TOP - k, in both inputs and labels
        x, y = out.inputs[r, :li - 1], out.labels[r, :lt - 1]
        want = [TOP - k for i in np.flatnonzero(row == r)
                for k in range(runs(out.noise[r, col[i]:col[i] + n[i]]))]
        assert x[x >= FIRST_FREE].tolist() == want == y[y >= FIRST_FREE].tolist()
    assert out.inputs.shape[1] == out.input_lengths.max() and out.labels.shape[1] == out.label_lengths.max()


@given(batches(), st.integers(0, 2**16))
def test_sentinels_never_collide_with_data_or_special_ids(batch, seed):
    tokens, row, col, n = batch
    out = corrupt(tokens, row, col, n, seed=seed, sentinel_top=FIRST_FREE + N_SENT - 1)
    for arr in (out.inputs, out.labels):
        ids = arr[(arr != PAD) & (arr != EOS) & (arr != IGNORE_INDEX)]
        sentinel = ids >= FIRST_FREE
        assert (ids[~sentinel] < N_DATA).all()  # every other id is a data id of the rows
        assert (ids[sentinel] <= FIRST_FREE + N_SENT - 1).all()


@given(batches(), st.integers(0, 2**16))
def test_same_seed_same_result(batch, seed):
    tokens, row, col, n = batch
    a, b = corrupt(tokens, row, col, n, seed=seed), corrupt(tokens, row, col, n, seed=seed)
    for x, y in zip((*a, a.input_lengths, a.label_lengths), (*b, b.input_lengths, b.label_lengths)):
        assert np.array_equal(x, y)


def test_different_seeds_give_different_masks():
    tokens = np.zeros((8, 512), dtype=np.int64)
    args = (tokens, np.arange(8), np.zeros(8, dtype=np.int64), np.full(8, 512))
    assert not np.array_equal(corrupt(*args, seed=1).noise, corrupt(*args, seed=2).noise)


def test_masks_are_uniform_over_t5s_choices():
    # 8 tokens, density 0.5, mean 2: 4 noise tokens in 2 spans, 4 non-noise in 2 spans: 3 x 3 equally likely masks
    masks = [m for m in itertools.product([False, True], repeat=8)
             if sum(m) == 4 and runs(np.array(m)) == 2 and not m[0] and m[-1]]
    assert len(masks) == 9
    pieces = 9000
    tokens = np.zeros((pieces // 4, 32), dtype=np.int64)  # four pieces of 8 tokens per row
    row, col = np.repeat(np.arange(pieces // 4), 4), np.tile(np.arange(0, 32, 8), pieces // 4)
    out = corrupt(tokens, row, col, np.full(pieces, 8), density=0.5, mean=2.0)
    seen = Counter(tuple(m) for m in out.noise.reshape(-1, 8).tolist())
    rng = np.random.default_rng(3)
    reference = Counter(tuple(random_spans_noise_mask(8, 0.5, 2.0, rng).tolist()) for _ in range(pieces))
    for counts in (seen, reference):
        assert set(counts) == set(masks)
        assert all(abs(c - pieces / 9) < 6 * (pieces * 8 / 81) ** 0.5 for c in counts.values())


# --- refusals ----------------------------------------------------------------------------------------------------

def test_too_few_sentinels_are_refused_and_max_spans_is_enough():
    tokens = np.zeros((1, 1000), dtype=np.int64)
    need = max_spans(1000, 0.15, 3.0)
    assert need == 50
    with pytest.raises(QueryError, match=r"n_sentinels=49 is too few.*needs 50 spans"):
        corrupt(tokens, [0], [0], [1000], n_sentinels=49)
    assert corrupt(tokens, [0], [0], [1000], n_sentinels=need).input_lengths.tolist() == [1000 - 150 + 50 + 1]


@pytest.mark.parametrize("kw, error, match", [
    (dict(sentinel_top=FIRST_FREE + N_SENT - 2), QueryError, "below first_free_id=261"),
    (dict(eos=TOP), QueryError, "eos=400 is one of the sentinel ids"),
    (dict(pad=TOP - 5), QueryError, "pad=395"),
    (dict(n_sentinels=0), QueryError, "n_sentinels"),
    (dict(sentinel_top=1.5), QueryError, "sentinel_top"),
    (dict(density=0.0), QueryError, "noise_density must be a number in \\(0, 1\\), got 0.0"),
    (dict(density=1.0), QueryError, "noise_density"),
    (dict(density=float("nan")), QueryError, "noise_density"),
    (dict(density=True), QueryError, "noise_density"),
    (dict(mean=0), QueryError, "mean_span must be a finite number > 0, got 0"),
    (dict(mean=float("inf")), QueryError, "mean_span"),
])
def test_bad_settings_are_refused_naming_the_argument(kw, error, match):
    tokens = np.zeros((1, 10), dtype=np.int64)
    with pytest.raises(error, match=match):
        corrupt(tokens, [0], [0], [10], **kw)


@pytest.mark.parametrize("tokens, row, col, n, match", [
    (np.zeros((2, 10)), [0], [0], [10], "tokens must be a 2-D integer array"),
    (np.zeros(10, dtype=np.int64), [0], [0], [10], "tokens must be a 2-D integer array"),
    (np.zeros((2, 10), dtype=np.int64), [2], [0], [10], "piece_row"),
    (np.zeros((2, 10), dtype=np.int64), [0], [3], [8], "piece 0 .* ends past the 10 columns"),
    (np.zeros((2, 10), dtype=np.int64), [0, 0], [0, 4], [5, 5], "without overlap: piece 1"),
    (np.zeros((2, 10), dtype=np.int64), [1, 0], [0, 0], [5, 5], "ordered by row then column"),
    (np.zeros((2, 10), dtype=np.int64), [0, 1], [0], [5, 5], "one entry per piece"),
    (np.zeros((2, 10), dtype=np.int64), [0], [0], [-1], "piece_len"),
    (np.full((2, 10), FIRST_FREE), [0], [0], [10], "a piece holds id 261, not below first_free_id=261"),
])
def test_bad_pieces_are_refused_naming_the_argument(tokens, row, col, n, match):
    with pytest.raises(InputError, match=match):
        corrupt(tokens, row, col, n)


def test_rng_must_be_a_generator():
    with pytest.raises(QueryError, match="rng must be a numpy.random.Generator"):
        span_corrupt(np.zeros((1, 4), dtype=np.int64), [0], [0], [4], 0, noise_density=0.15, mean_span=3.0,
                     sentinel_top=TOP, n_sentinels=N_SENT, first_free_id=FIRST_FREE, eos=EOS, pad=PAD)


def test_rebuild_refuses_mismatched_sentinels():
    inputs, labels = np.array([[5, TOP, EOS]]), np.array([[TOP - 1, 7, EOS]])
    with pytest.raises(InputError, match="row 0"):
        rebuild(inputs, labels, np.array([3]), np.array([3]), sentinel_top=TOP, n_sentinels=N_SENT)


def test_the_result_unpacks_as_inputs_labels_noise():
    tokens = np.arange(40, dtype=np.int64).reshape(2, 20)
    out = corrupt(tokens, [0, 1], [0, 0], [20, 20])
    inputs, labels, noise = out
    assert inputs is out.inputs and labels is out.labels and noise is out.noise and noise.shape == (2, 20)
    assert out.input_lengths.tolist() == [20 - 3 + 1 + 1] * 2 and out.label_lengths.tolist() == [3 + 1 + 1] * 2


def test_an_empty_batch_gives_empty_outputs():
    out = corrupt(np.zeros((2, 0), dtype=np.int64), [], [], [])
    assert out.inputs.shape == (2, 0) and out.labels.shape == (2, 0) and out.input_lengths.tolist() == [0, 0]
