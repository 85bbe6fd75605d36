#!/usr/bin/env python3
"""bf16 GEMMs of known shapes, for the operator roofline's check against Nsight Compute
(bench/nvidia_trace_knows.sh): torch.mm, F.linear on a 3-D input, torch.bmm; every dimension a
multiple of 256, so no kernel pads a tile and the counters count exactly the shapes' FLOPs.
Prints each shape's FLOP per call as `KNOWS_GEMM {json}`."""
import json

import torch
import torch.nn.functional as F

REPEAT = 6
device = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
a, b = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16), torch.randn(4096, 4096, device=device,
                                                                                  dtype=torch.bfloat16)
x, w = torch.randn(8, 1024, 4096, device=device, dtype=torch.bfloat16), torch.randn(2048, 4096, device=device,
                                                                                     dtype=torch.bfloat16)
q, k = torch.randn(32, 1024, 256, device=device, dtype=torch.bfloat16), torch.randn(32, 256, 1024, device=device,
                                                                                     dtype=torch.bfloat16)
shapes = {"aten::mm": 2 * 4096 * 4096 * 4096, "aten::linear": 2 * 8 * 1024 * 4096 * 2048,
          "aten::bmm": 2 * 32 * 1024 * 256 * 1024}
for _ in range(REPEAT):
    torch.mm(a, b)
    F.linear(x, w)
    torch.bmm(q, k)
torch.cuda.synchronize()
for name, flop in shapes.items():
    print("KNOWS_GEMM " + json.dumps({"operator": name, "flop_per_call": flop, "calls": REPEAT}), flush=True)
