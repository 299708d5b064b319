"""Length-aware sub-batches for the python-backend endpoint; `build` copies this file next to model.py.

Padding every text of a dynamic batch to its longest one costs CPU on the padded positions: at concurrency 8
the endpoint forms batches of 8 and ONNX Runtime's CPU time per text grows with the batch (serving/README.md,
reports/bench/serve.json `onnxruntime_limit`), while one call per text pays the call's fixed cost each time.
`length_groups` sorts the batch by token length and cuts it where a new call costs less than the padding it
saves, under a linear cost model: a call costs `overhead` token-equivalents plus rows x padded length. The
cut is exact (dynamic programming over the sorted lengths), so the result never costs more than one padded
batch under the model. Pure Python with no Triton import: the unit tests load it directly.
"""


def length_groups(lengths, overhead, multiple=1):
    """Row indices in groups of similar length, each with its padded length: [(rows, length), ...].

    `lengths`: each row's token count; `overhead`: a call's fixed cost in token-equivalents (None: one group,
    today's single padded batch); `multiple`: padded lengths round up to it (a GPU engine's few shapes).
    """
    n = len(lengths)
    padded = [-(-max(1, x) // multiple) * multiple for x in lengths]
    if overhead is None or n <= 1:
        return [(list(range(n)), max(padded, default=0))]
    order = sorted(range(n), key=padded.__getitem__)
    ordered = [padded[i] for i in order]
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        # Sorted ascending: a group ending at `end` pads to ordered[end - 1].
        width = ordered[end - 1]
        for start in range(end):
            cost = best[start] + overhead + (end - start) * width
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups = []
    end = n
    while end > 0:
        start = cut[end]
        groups.append((order[start:end], ordered[end - 1]))
        end = start
    return groups[::-1]
