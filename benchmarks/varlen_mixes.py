"""The packed batches bench_varlen.py and bench_ab.py time: "uniform", 64 sequences of lengths uniform in
[128, 4096] (seed 0), and "skewed", one 16k sequence and 64 of 256. Plain lists of lengths (no flashcute import), so
an A/B passes the same lengths to every checkout it times."""

import torch


def mixes():
    generator = torch.Generator().manual_seed(0)
    uniform = torch.randint(128, 4097, (64,), generator=generator).tolist()
    return {"uniform": uniform, "skewed": [16384] + [256] * 64}
