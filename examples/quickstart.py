"""Quick start: build a Consumer over a small generated corpus, select, query, decode.

Run: python examples/quickstart.py
"""

import os
import tempfile

from consumer import Consumer


def make_corpus(root: str) -> None:
    """Two classes of small files: text notes and binary blobs."""
    for cls in ("notes", "blobs"):
        os.makedirs(os.path.join(root, cls))
    for i in range(6):
        with open(os.path.join(root, "notes", f"note{i}.txt"), "w") as f:
            f.write(f"note {i}: " + "the quick brown fox jumps over the lazy dog\n" * (i + 1))
        with open(os.path.join(root, "blobs", f"blob{i}.bin"), "wb") as f:
            f.write(os.urandom(100 * (i + 1) + i))  # odd sizes: tails round-trip too


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        make_corpus(root)
        ds = Consumer(root, style="concat", n_bytes=2, seqlen=64, seed=4)
        print(ds)
        print("classes:", ds.classes, "class_to_id:", ds.class_to_id)
        print("samples per class:", ds.samples_per_class())

        batch = ds[{"notes": 2, "blobs": 2}, "supervised"]
        print({k: tuple(v.shape) for k, v in batch.items()}, "classes:", batch["class"].tolist())

        ds.set_unsupervised_mode(mask_frequency=0.15)
        mlm = ds[0:4, "mlm"]
        print("masked positions:", int((mlm["labels"] != -100).sum()))

        row = ds[{"notes": [0]}, None]["input_array"][0]  # explicit None: unmasked, whatever the mode
        print("decoded:", ds.decode(row, specials="tags")[:120])

        # every file comes back byte for byte
        for file_id, path in enumerate(ds.files):
            tokens = ds.document_tokens(file_id)
            content = tokens[list(tokens).index(ds.vocab.sep) + 1:]
            assert ds.decode(content) == open(path, "rb").read()
        print("all", len(ds.files), "files round-trip exactly")

        ds.create_batches(batch_size=4, seed=0)
        for step in range(3):
            b = ds.get_next_batch("supervised")
            print("step", step, tuple(b["input_array"].shape), b["class"].tolist())


if __name__ == "__main__":
    main()
