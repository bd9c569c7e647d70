"""An ART 2-style neural network recognising image patches (a stand-in for SPEC CPU2000
179.art): every input is compared with every F2 node's long-term-memory weights (one pass
over the whole weight matrix), the best match that passes the vigilance test learns the
input, else a new node is committed. The weight matrix (NODES x FEATURES float64) is larger
than the caches, so each input streams it from memory, as art's F1/F2 scans do.

Usage: art.py INPUTS NODES FEATURES SEED"""
import sys

import numpy as np

inputs, nodes, features, seed = (int(a) for a in sys.argv[1:5])
rng = np.random.default_rng(seed)
# Inputs: noisy copies of a few prototype "objects" (art's images of a helicopter and an
# airplane in a larger scene).
prototypes = rng.random((8, features))
weights = np.full((nodes, features), 1.0 / (1.0 + np.sqrt(features)))  # uncommitted
committed = 0
vigilance, rate = 0.92, 0.6
matches = 0
for i in range(inputs):
    x = prototypes[rng.integers(8)] + 0.05 * rng.standard_normal(features)
    x = np.abs(x) / np.linalg.norm(x)
    act = weights @ x  # F2 activations: one pass over every node's weights
    for j in np.argsort(act)[::-1][:3]:  # search the three best, as art's reset loop
        w = weights[j]
        if j < committed and w @ x / (np.linalg.norm(w) + 1e-12) >= vigilance:
            weights[j] = rate * x + (1 - rate) * w  # resonance: learn
            matches += 1
            break
    else:
        if committed < nodes:
            weights[committed] = x  # commit a new node
            committed += 1
print(f"{inputs} inputs, {committed} nodes committed, {matches} matches")
