#!/usr/bin/env python3
"""Experiment behind docs/benchmarks.md ("Gloo's I/O thread"): how often Gloo's tcp loop thread calls
epoll_wait around point-to-point messages, by how receives are posted. Two ranks (spawned); rank 0
computes ~2 ms then sends a 64 KiB tensor; rank 1 either computes as long then receives ("sync"),
posts the receive ~4 ms before waiting ("early"), posts it just before waiting after 4 ms ("late"),
or sleeps without messages ("idle"). Run with the venv's python under perf:
  perf stat -e syscalls:sys_enter_epoll_wait -- PYTHON scripts/bench/gloo_loop_spin.py MODE 500 PORT
"""
import argparse
import os
import time
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def work():
    """About 2 ms of single-threaded matrix products."""
    a = torch.randn(128, 128)
    start = time.perf_counter()
    while time.perf_counter() - start < 0.002:
        a = (a @ a).tanh()


def run(rank, mode, messages):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    x = torch.zeros(4, 64, 64)
    if mode == "idle":
        time.sleep(messages / 100)
    for i in range(messages if mode != "idle" else 0):
        if rank == 0:
            work()
            dist.isend(x, 1, tag=i).wait()
        elif mode == "sync":
            work()
            dist.irecv(x, 0, tag=i).wait()
        elif mode == "early":
            op = dist.irecv(x, 0, tag=i)
            work()
            work()
            op.wait()
        else:
            work()
            work()
            dist.irecv(x, 0, tag=i).wait()
    dist.barrier()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["sync", "early", "late", "idle"])
    parser.add_argument("messages", type=int)
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    mp.spawn(run, args=(args.mode, args.messages), nprocs=2)
