"""Writes a seeded DIMACS min-cost-flow problem (the format `glpsol --mincost` reads) shaped
like SPEC CPU2000 181.mcf's single-depot vehicle scheduling: every timetabled trip is an arc
(start node -> end node) that must carry one vehicle (lower bound 1); a vehicle leaves the
depot for a trip's start (pull-out), returns from a trip's end (pull-in) or runs empty from
a trip's end to the start of a later trip (deadhead); unused vehicles stay at the depot.
Usage: make_min.py TRIPS DEADHEADS_PER_TRIP SEED."""
import random
import sys

n, per, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
depot = 1
start = lambda t: 2 + 2 * t
end = lambda t: 3 + 2 * t
arcs = []
for t in range(n):
    arcs.append((start(t), end(t), 1, 1, 0))  # the trip itself
    arcs.append((depot, start(t), 0, 1, rng.randint(2000, 4000)))  # pull-out (vehicle cost)
    arcs.append((end(t), depot, 0, 1, rng.randint(10, 100)))  # pull-in
    for _ in range(per):
        u = t + rng.randint(1, 300)
        if u < n:
            arcs.append((end(t), start(u), 0, 1, rng.randint(1, 500)))  # deadhead
out = sys.stdout
out.write(f"c seeded single-depot vehicle scheduling, {n} trips, seed {seed}\n")
out.write(f"p min {2 * n + 1} {len(arcs)}\n")
for a in arcs:
    out.write("a " + " ".join(str(x) for x in a) + "\n")
