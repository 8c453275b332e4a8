"""*Mixtures: fetch, open and the blend index* (suite section ``mixtures``; probes ``mixture_costs`` and
``blend_index``, issue #37) and its three targets."""

from __future__ import annotations

from ..markdown import fmt, table
from .pretraining import caption, mark
from .probe_doc import get, head, results, verdict

__all__ = ["render_section", "verdicts", "SECTION", "TITLE"]

SECTION = "mixtures"
TITLE = "Mixtures: fetch, open and the blend index (issue #37)"
_MIB = 2 ** 20
_FETCH_TARGET = {"batch": 20, "seqlen": 8192, "parts": 3}
_CASES = ("mixture steps", "mixture random")

_INTRO = ("What a mixture (`consumer.mix`, `consumer/mixtures/`) costs over its parts: a batch's fetch against one "
          "store of the same data, a mixture's open against its parts' opens, and the blend index of Megatron's "
          "`BlendedDataset` (`consumer.formats.megatron_blending`) against megatron-core's compiled helper. Each "
          "part names its probe's command and the load average at its start.")


def _ms(x) -> str:
    return fmt(None if x is None else x * 1e3)


# ----------------------------------------------------------------- fetch
def _fetch_verdict(f: dict | None) -> tuple[str | None, bool | None, str]:
    """(figure, met, why): the mixture's batch ÷ one store's, interleaved paired medians (both id sources)."""
    xs = {c: get(f, "interleaved", f"{c.replace(' ', '_')}_over_one") for c in _CASES}
    if f is None or any(x is None for x in xs.values()):
        return None, None, ""
    figure = (f"{fmt(xs['mixture steps'])}× with the loader's ids, {fmt(xs['mixture random'])}× with random ids, "
              f"interleaved; back to back {fmt(get(f, 'back_to_back', 'mixture_steps_over_one'))}× and "
              f"{fmt(get(f, 'back_to_back', 'mixture_random_over_one'))}×; the loaders "
              f"{fmt(get(f, 'loader', 'mixture_over_one'))}×")
    sizes = {k: f.get(k) for k in _FETCH_TARGET}
    if sizes != _FETCH_TARGET:
        return figure, None, (f"this run: {sizes['parts']} parts, batches of {sizes['batch']} × {sizes['seqlen']}, "
                              "not the target's 3 parts, 20 × 8192")
    met = max(xs.values()) <= 1.10
    one, mixed = (get(f, "interleaved", "timings", c, "median_us") for c in ("one store", "mixture steps"))
    added = f"+{fmt(mixed - one)} µs a batch: " if one is not None and mixed is not None else ""
    why = "" if met else (f"{added}each part's rows are written straight into the batch (no join), but each part "
                          "is one more fetch with its fixed costs (the query and ids checked, the store's stamp "
                          "`fstat`, its chunk-sum bookkeeping), and the ids are split by part; the loader adds the "
                          "plan's step (the counts by part and each part's ids)")
    return figure, met, why


def _fetch(res: dict, f: dict) -> list[str]:
    figure, met, why = _fetch_verdict(f)
    out = [f"**A batch from a mixture of {f.get('parts')} packed stores against one store** "
           f"({caption(res, SECTION, 'costs')}): the generated `small` corpus ({f.get('files', 0):,} files, "
           f"{fmt(f['corpus_bytes'] / 1e6) if 'corpus_bytes' in f else '—'} MB, `n_bytes=2`) packed once whole "
           f"(*one store*, {get(f, 'rows', 'one store') or 0:,} rows) and once as {f.get('parts')} stores of "
           f"1/{f.get('parts')} of the files each (`ds.split` by file, stratified per class; their "
           f"{get(f, 'rows', 'mixture') or 0:,} rows as `consumer.mix` of the three, natural weights), all opened "
           f"with `Consumer.from_packed(prefix, style=\"{f.get('style')}\", seqlen={f.get('seqlen')})`, page cache "
           f"warm, every row fetched once before timing. Batches of {f.get('batch')} rows, plain query "
           f"`fetch_numpy(ids, None)`, {f.get('reps')} repetitions: *one store* random ids of its own, *mixture "
           "random* random global ids of the mixture, *mixture steps* the ids of the mixture loader's global steps "
           "in order (what its loader fetches). *Interleaved*: the cases in turn on each repetition, order "
           "rotated; *back to back*: each case over all the repetitions in a run of its own. × one store: the "
           "median of the per-repetition ratios. Last row: the loaders themselves (`dataloader(20, query=None)`, "
           "in process, torch tensors), their `next()` interleaved. Target: the mixture's batch ≤ 1.10× one "
           f"store's: {mark(met if figure else None)}" + (f" ({figure})" if figure else "") +
           (f"; {why}." if why else "."), ""]
    rows = []
    for name in ("one store", *_CASES):
        i, b = get(f, "interleaved", "timings", name) or {}, get(f, "back_to_back", "timings", name) or {}
        rows.append([name, f"{fmt(i.get('median_us'))} ({fmt(i.get('best_us'))})", fmt(i.get("ratio")),
                     f"{fmt(b.get('median_us'))} ({fmt(b.get('best_us'))})", fmt(b.get("ratio"))])
    lo = get(f, "loader", "timings") or {}
    if lo:
        rows.append([f"loaders, {get(f, 'loader', 'reps')} batches: one store / mixture",
                     f"{fmt(get(lo, 'one store', 'median_us'))} / {fmt(get(lo, 'mixture', 'median_us'))}",
                     fmt(get(f, "loader", "mixture_over_one")), "", ""])
    return out + table(["batch of", "interleaved µs, median (best)", "× one store", "back to back µs, median (best)",
                        "× one store"], rows) + [""]


# ----------------------------------------------------------------- open
def _open_rows(o: dict | None) -> list[dict]:
    return [r for r in ((o or {}).get("sizes") or {}).values() if "median" in r]


def _open_verdict(o: dict | None) -> tuple[str | None, bool | None, str]:
    """(figure, met, why): ``mix`` ≤ 10 % of the parts' opens at every size, and not growing with the samples."""
    rows = _open_rows(o)
    if not rows:
        return None, None, ""
    top = rows[-1]
    med = top["median"]
    growth, samples = (o or {}).get("mix_growth"), (o or {}).get("samples_growth")
    figure = (f"at {top['samples']:,} samples in {(o or {}).get('parts')} parts: the parts' warm opens "
              f"{_ms(med['opens_s'])} ms, `consumer.mix` {_ms(med['mix_s'])} ms "
              f"({fmt(100 * top['mix_over_opens'])} % of them)")
    if growth is not None:
        figure += f"; ×{fmt(samples, 0)} the samples: `mix` ×{fmt(growth)}"
    met = all(r["mix_over_opens"] <= 0.10 for r in rows) and (growth is None or growth <= 2.0)
    why = "" if met else "`mix` over 10 % of the parts' opens, or growing with the samples"
    if top["samples"] < 10 ** 6:
        return figure, None, f"this run's largest size: {top['samples']:,} samples, not 10^6"
    return figure, met, why


def _open(res: dict, o: dict) -> list[str]:
    figure, met, why = _open_verdict(o)
    out = [f"**A mixture's open against its parts' opens** ({caption(res, SECTION, 'costs')}): per total size, "
           f"{o.get('parts')} Megatron `.bin/.idx` stores written directly (`IndexedWriter.add_segments`, uint16 ids, "
           f"documents of 1-15 tokens), opened as `style=\"{o.get('style')}\"` rows of {o.get('seqlen')} tokens (short "
           "rows: many samples from a small store). A first process opens each part once (the sample index built "
           f"and cached), then {o.get('repeat')} fresh processes, page cache and index cache warm, each time "
           "`Consumer.from_packed` of every part (a warm reopen; the first part's also pays what a process's first "
           "open pays once), `consumer.mix(parts)` (its module imported "
           f"before: the import is shown apart), `m.dataloader({o.get('batch')})` and the loader's first batch, "
           f"and a first `m.fetch_numpy` of {o.get('batch')} random ids. Medians over the processes. Target: the "
           "mixture's open is the sum of its parts' opens, nothing per sample (`mix` ≤ 10 % of the parts' opens "
           f"and not growing with the samples): {mark(met if figure else None)}" + (f" ({figure})" if figure else "") +
           (f"; {why}." if why else "."), ""]
    rows = []
    for r in _open_rows(o):
        med, first = r["median"], r.get("first_open") or {}
        docs = sum(s.get("documents", 0) for s in r.get("stores") or [])
        mb = sum(s.get("bin_bytes", 0) + s.get("idx_bytes", 0) for s in r.get("stores") or []) / 1e6
        rows.append([f"{r['samples']:,}", f"{docs:,}", fmt(mb), _ms(first.get("opens_s")),
                     " + ".join(_ms(x) for x in med["part_open_s"]) + f" = {_ms(med['opens_s'])}",
                     _ms(med["mix_s"]), fmt(100 * r["mix_over_opens"]), fmt(med["mix_rss_added"] / _MIB),
                     _ms(med["import_s"]), _ms(med["loader_s"]), _ms(med["first_batch_s"]),
                     _ms(med["first_fetch_s"])])
    out += table(["samples", "documents", "stores MB", "first opens ms", "warm opens ms (each part = sum)",
                  "`mix` ms", "`mix` % of opens", "`mix` RSS MiB", "import of `consumer.mixtures` ms",
                  "`m.dataloader` ms", "loader's first batch ms", "first `fetch_numpy` ms"], rows) + [""]
    rows_ = _open_rows(o)
    if len(rows_) >= 2:
        a, b = rows_[0]["median"], rows_[-1]["median"]
        growth = b["first_batch_s"] / a["first_batch_s"] if a["first_batch_s"] else None
        more = rows_[-1]["samples"] / rows_[0]["samples"]
        grows = growth is not None and growth > 0.5 * more
        out += [f"The loader's first batch is not part of the open; from {rows_[0]['samples']:,} to "
                f"{rows_[-1]['samples']:,} samples (×{fmt(more, 0)}) it takes ×{fmt(growth)} the time" +
                (": it grows with the samples, since the first batch draws each part's first epoch, a "
                 "permutation of the part's samples (as a dataset's loader draws its epoch's order); the steps "
                 "themselves are made one at a time as they are read." if grows else
                 ": the steps are made one at a time as they are read."), ""]
    return out


# ----------------------------------------------------------------- blend index
def _blend_rows(b: dict | None) -> list[dict]:
    return [r for r in (b or {}).get("sizes") or [] if r.get("time_ratio") is not None]


def _blend_verdict(b: dict | None) -> tuple[str | None, bool | None, str]:
    rows = _blend_rows(b)
    if not rows:
        reason = get(((b or {}).get("sizes") or [{}])[0], "megatron", "reason")
        return None, None, reason or ""
    top = max(rows, key=lambda r: r["size"])
    figure = (f"{fmt(top['time_ratio'])}× at {top['size']:,} samples over {b.get('parts')} parts "
              f"({fmt(top['consumer']['seconds'])} s against {fmt(top['megatron']['seconds'])} s, "
              f"{'bit-identical' if top.get('identical') else 'NOT identical'})")
    if top["size"] < 10 ** 8:
        return figure, None, f"this run built {top['size']:,} samples, not 10^8"
    met = top["time_ratio"] <= 2.0 and bool(top.get("identical"))
    return figure, met, "" if met else "slower than 2× or not identical"


def _blend(res: dict, b: dict) -> list[str]:
    figure, met, why = _blend_verdict(b)
    out = [f"**The blend index** ({caption(res, SECTION, 'blend')}): `dataset_index` (int16) and "
           f"`dataset_sample_index` (int64) of {b.get('parts')} parts with seeded random weights, as "
           "`BlendedDataset` builds them, by `consumer.formats.megatron_blending.build_blending_indices` (numpy) "
           "and by megatron-core's compiled `helpers_cpp.build_blending_indices` (its `.so` loaded alone), each in a "
           f"fresh process, best of {b.get('repeat')}; *identical*: equal blake2b digests of both arrays. Target: "
           f"≤ 2× megatron-core's helper at 10^8 samples: {mark(met if figure else None)}" +
           (f" ({figure})" if figure else "") + (f"; {why}." if why else "."), ""]
    rows = []
    for r in (b.get("sizes") or []):
        mg, us = r.get("megatron") or {}, r.get("consumer") or {}
        rows.append([f"{r.get('size', 0):,}", fmt(mg.get("seconds")), fmt(us.get("seconds")), fmt(r.get("time_ratio")),
                     {True: "yes", False: "**no**"}.get(r.get("identical"), "—"),
                     fmt(mg["peak_rss"] / _MIB) if "peak_rss" in mg else "—",
                     fmt(us["peak_rss"] / _MIB) if "peak_rss" in us else "—"])
    return out + table(["samples", "megatron-core s", "consumer s", "consumer ÷ megatron-core", "identical",
                        "megatron-core peak RSS MiB", "consumer peak RSS MiB"], rows) + [""]


# ----------------------------------------------------------------- the section
def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head(TITLE, res, SECTION, _INTRO)
    costs = results(res, SECTION, "costs") or {}
    if costs.get("fetch"):
        out += _fetch(res, costs["fetch"])
    if costs.get("open"):
        out += _open(res, costs["open"])
    blend = results(res, SECTION, "blend")
    if blend is not None:
        out += _blend(res, blend)
    return out


def verdicts(res: dict) -> list[dict]:
    """The mixture's batch ≤ 1.10× one store's; its open the sum of its parts'; the blend index ≤ 2× megatron-core."""
    out = []
    costs = results(res, SECTION, "costs")
    if costs is not None:
        figure, met, why = _fetch_verdict(costs.get("fetch"))
        out.append(verdict("mixtures: a 20 × 8192 batch from 3 packed stores ≤ 1.10× from one store", figure, met, why))
        figure, met, why = _open_verdict(costs.get("open"))
        out.append(verdict("mixtures: the open is the sum of the parts' opens, nothing per sample", figure, met, why))
    blend = results(res, SECTION, "blend")
    if blend is not None:
        figure, met, why = _blend_verdict(blend)
        out.append(verdict("mixtures: the blend index of 10^8 samples over 10 parts ≤ 2× megatron-core's helper",
                           figure, met, why))
    return out
