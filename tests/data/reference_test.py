"""ppctl's token sources against the reference implementations: datasets written by Megatron-Core's
IndexedDatasetBuilder (uint16 and int32, several documents, an empty one, multi-sequence documents)
and flat token files written with numpy are read by ppctl (tests/data/token_dump.cpp) token for
token, with Megatron's own IndexedDataset / numpy.memmap as the reference reading.
Usage: reference_test.py PATH_TO_ppctl_token_dump"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy
import torch
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

DUMP = sys.argv[1]


def ppctl_read(*args):
    out = subprocess.run([DUMP, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def check_megatron(folder: Path, dtype, documents, multi_sequence: bool):
    prefix = str(folder / f"ds_{numpy.dtype(dtype).name}_{int(multi_sequence)}")
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    for doc in documents:
        if multi_sequence and len(doc) >= 2:  # a document of two sequences, via add_item + end_document
            half = len(doc) // 2
            builder.add_item(torch.tensor(doc[:half], dtype=torch.int64))
            builder.add_item(torch.tensor(doc[half:], dtype=torch.int64))
            builder.end_document()
        else:
            builder.add_document(torch.tensor(doc, dtype=torch.int64), [len(doc)])
    builder.finalize(prefix + ".idx")

    reference = IndexedDataset(prefix)
    ours = ppctl_read("megatron", prefix)
    expected_ids = numpy.concatenate([reference[i] for i in range(len(reference))]).astype(numpy.int64)
    assert ours["ids"] == expected_ids.tolist(), (prefix, ours["ids"][:20], expected_ids[:20])
    assert ours["tokens"] == int(reference.sequence_lengths.sum())
    assert ours["sequence_lengths"] == reference.sequence_lengths.tolist()
    assert ours["document_index"] == reference.document_indices.tolist()
    assert ours["documents"] == len(reference.document_indices) - 1 == len(documents)
    # Each document, token for token, as Megatron slices it.
    doc_index = reference.document_indices
    starts = numpy.concatenate([[0], numpy.cumsum(reference.sequence_lengths)])
    for d in range(len(documents)):
        first, last = doc_index[d], doc_index[d + 1]
        ours_doc = ours["ids"][starts[first]:starts[last]]
        theirs = [int(t) for s in range(first, last) for t in reference[s]]
        assert ours_doc == theirs == list(documents[d]), (d, ours_doc, theirs)
    print(f"megatron {numpy.dtype(dtype).name} multi_sequence={multi_sequence}: {len(documents)} documents, "
          f"{ours['tokens']} tokens identical")


def check_flat(folder: Path, dtype, values):
    path = folder / f"flat_{numpy.dtype(dtype).name}.bin"
    numpy.asarray(values, dtype=dtype).tofile(path)
    reference = numpy.memmap(path, dtype=dtype, mode="r")
    ours = ppctl_read("tokens", str(path), numpy.dtype(dtype).name)
    assert ours["ids"] == reference.astype(numpy.int64).tolist()
    assert ours["tokens"] == len(reference) and ours["documents"] == 1
    print(f"tokens {numpy.dtype(dtype).name}: {len(reference)} ids identical to numpy.memmap")


def main():
    rng = numpy.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        docs16 = [rng.integers(0, 65535, size=n).tolist() for n in (7, 1, 0, 300, 2, 0, 51)]
        docs32 = [rng.integers(0, 2**31 - 1, size=n).tolist() for n in (0, 5, 128, 9, 0)]
        for multi in (False, True):
            check_megatron(folder, numpy.uint16, docs16, multi)
            check_megatron(folder, numpy.int32, docs32, multi)
        check_flat(folder, numpy.uint16, rng.integers(0, 65536, size=1000))
        check_flat(folder, numpy.uint32, rng.integers(0, 2**32, size=1000, dtype=numpy.uint64))
        check_flat(folder, numpy.int32, rng.integers(-2**31, 2**31, size=1000))
        # A corrupt index is refused by both: exit 2 here, an assertion in Megatron.
        prefix = str(folder / "ds_uint16_0")
        raw = bytearray(Path(prefix + ".idx").read_bytes())
        raw[0:1] = b"X"
        Path(prefix + ".idx").write_bytes(bytes(raw))
        bad = subprocess.run([DUMP, "megatron", prefix], capture_output=True, text=True)
        assert bad.returncode == 2 and "bad magic" in bad.stderr, bad.stderr
    print("ok")


if __name__ == "__main__":
    main()
