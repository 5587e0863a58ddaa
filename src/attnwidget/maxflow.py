"""Maximum flow through attention's layered graph (attention flow, :func:`attnwidget.mixing.attention_flow`):
igraph's compiled routine when igraph is installed (``pip install attnwidget[flow]``), else Dinic's algorithm
written here. Both are exact, and the tests hold each to networkx's."""

from __future__ import annotations

import importlib.util

import numpy as np


def layered_flow(a: np.ndarray):
    """For Â (layers × n × n, row i of layer l reading token j below it), a function ``flow(j, i, lo, hi)``:
    the maximum flow from token j below the first layer to token i above the last through tokens lo … hi − 1
    between them (a causal graph's path from j to i passes only tokens j … i)."""
    if compiled_flow():
        try:
            return _igraph_flow(a)
        except ImportError:  # (found but broken)
            pass
    return _dinic_flow(a)


def compiled_flow() -> bool:
    """Whether igraph is installed (found, not imported: importing it takes a fifth of a second)."""
    return importlib.util.find_spec("igraph") is not None


def _nodes(layers: int, n: int, j: int, i: int, lo: int, hi: int) -> list[int]:
    """The pair's nodes in ascending order (node l·n + t: token t below layer l): j below the first layer,
    tokens lo … hi − 1 between the layers, i above the last; no other node carries flow from j to i."""
    between = np.arange(1, layers)[:, None] * n + np.arange(lo, hi)
    return [j, *between.ravel().tolist(), layers * n + i]


def _igraph_flow(a: np.ndarray):
    """igraph's compiled routine on the whole graph, or for a window on the subgraph of its nodes (which igraph
    numbers in ascending order: source first, sink last)."""
    import igraph

    layers, n = a.shape[0], a.shape[-1]
    at, to, of = np.nonzero(a)  # row `to` of layer `at` reads token `of` below it
    edges = np.stack([at * n + of, (at + 1) * n + to], axis=1)
    graph = igraph.Graph(
        n=(layers + 1) * n, edges=edges.tolist(), directed=True, edge_attrs={"c": a[at, to, of].tolist()}
    )

    def flow(j: int, i: int, lo: int, hi: int) -> float:
        if (lo, hi) == (0, n):  # (every token: the other ends' nodes carry nothing, and no subgraph is made)
            return graph.maxflow_value(j, layers * n + i, capacity="c")
        nodes = _nodes(layers, n, j, i, lo, hi)
        return graph.induced_subgraph(nodes, "create_from_scratch").maxflow_value(0, len(nodes) - 1, capacity="c")

    return flow


def _dinic_flow(a: np.ndarray):
    """Dinic's algorithm on the dense capacity matrix of the pair's nodes."""
    layers, n = a.shape[0], a.shape[-1]
    cap = np.zeros(((layers + 1) * n,) * 2)
    for at in range(layers):
        cap[at * n : (at + 1) * n, (at + 1) * n : (at + 2) * n] = a[at].T

    def flow(j: int, i: int, lo: int, hi: int) -> float:
        nodes = _nodes(layers, n, j, i, lo, hi)
        return _max_flow(cap[np.ix_(nodes, nodes)], 0, len(nodes) - 1)

    return flow


def _max_flow(left: np.ndarray, source: int, sink: int, tiny: float = 1e-15) -> float:
    """The maximum flow from source to sink of a dense capacity matrix (Dinic's algorithm), which
    becomes the residual capacities."""
    total = 0.0
    while True:
        level = np.full(len(left), -1)
        level[source], frontier = 0, [source]
        while frontier and level[sink] < 0:  # breadth first: each node's distance from the source
            ahead = np.flatnonzero((left[frontier] > tiny).any(axis=0) & (level < 0))
            level[ahead] = level[frontier[0]] + 1
            frontier = list(ahead)
        if level[sink] < 0:
            return total
        nexts = {}  # each node's edges one level on, tried in turn
        while True:  # a blocking flow: paths along rising levels until none is left
            path, u = [source], source
            while u != sink:
                if u not in nexts:
                    nexts[u] = list(np.flatnonzero((left[u] > tiny) & (level == level[u] + 1)))
                while nexts[u] and (left[u, nexts[u][-1]] <= tiny or level[nexts[u][-1]] != level[u] + 1):
                    nexts[u].pop()  # saturated, or a dead end
                if not nexts[u]:  # a dead end: never tried again in this phase
                    level[u] = -1
                    if u == source:
                        break
                    path.pop()
                    u = path[-1]
                    continue
                u = int(nexts[u][-1])
                path.append(u)
            if u != sink:
                break
            pushed = min(left[x, y] for x, y in zip(path, path[1:]))
            for x, y in zip(path, path[1:]):
                left[x, y] -= pushed
                left[y, x] += pushed
            total += pushed
