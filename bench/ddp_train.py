#!/usr/bin/env python3
"""A small DDP training run whose loss curve is compared between process-group backends
(bench/gpu_dropin.sh): an MLP on a fixed synthetic regression task, the same seed on every rank
for the weights and a per-rank seed for the data, plain SGD, STEPS steps. Rank 0 prints one line
per step, "step <i> loss <value>", the loss averaged over the ranks with an all_reduce.

usage: torchrun --nproc-per-node N bench/ddp_train.py --backend nccl|gloo [--steps 300] [--device cuda|cpu]
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True, choices=["nccl", "gloo"])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 on both backends
        torch.backends.cudnn.allow_tf32 = False
    dist.init_process_group(args.backend, device_id=device if args.backend == "nccl" else None)
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 256),
                                torch.nn.Tanh(), torch.nn.Linear(256, 1)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[0] if device.type == "cuda" else None, bucket_cap_mb=1)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + rank)
    target = torch.Generator().manual_seed(7)
    teacher = torch.randn(64, 1, generator=target)
    for step in range(args.steps):
        x = torch.randn(128, 64, generator=data)
        y = torch.tanh(x @ teacher)
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print(f"step {step} loss {mean.item() / world:.9g}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
