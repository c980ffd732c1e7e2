"""Strongly connected components and one witness cycle per component, for dependency graphs of
transactions. Iterative (histories have ~10^5 transactions: recursion would overflow)."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping

Graph = Mapping[Hashable, Iterable[Hashable]]


def strongly_connected_components(graph: Graph) -> list[list[Hashable]]:
    """Tarjan's algorithm. Returns the components of more than one node (a node with an edge to itself
    is not reported: the dependency graphs here never hold such edges)."""
    index: dict[Hashable, int] = {}
    low: dict[Hashable, int] = {}
    on_stack: set[Hashable] = set()
    stack: list[Hashable] = []
    components: list[list[Hashable]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(graph.get(root, ())))]
        while work:
            node, successors = work[-1]
            descended = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(graph.get(successor, ()))))
                    descended = True
                    break
                if successor in on_stack and index[successor] < low[node]:
                    low[node] = index[successor]
            if descended:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return components


def find_cycle(graph: Graph, component: Iterable[Hashable],
               first_edge: tuple[Hashable, Hashable] | None = None) -> list[Hashable]:
    """A shortest cycle inside ``component`` (through ``first_edge`` when given), as a node list whose
    last element repeats the first: [a, b, c, a]. Breadth-first, so a few edges only."""
    members = set(component)
    if first_edge is None:
        start = next(iter(members))
        following = next(node for node in graph.get(start, ()) if node in members)
    else:
        start, following = first_edge
    # Search a path following -> start inside the component.
    parents: dict[Hashable, Hashable | None] = {following: None}
    queue = deque([following])
    while queue:
        node = queue.popleft()
        if node == start:
            break
        for successor in graph.get(node, ()):
            if successor in members and successor not in parents:
                parents[successor] = node
                queue.append(successor)
    if start not in parents:
        raise ValueError("the component holds no cycle through that edge")
    path = []
    node: Hashable | None = start
    while node is not None:
        path.append(node)
        node = parents[node]
    path.reverse()  # following ... start
    return [start, *path]
