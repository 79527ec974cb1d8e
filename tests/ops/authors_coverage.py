"""A verbatim port of the authors' Eq. 4 selection, the oracle for ``coverage_select``'s default rule.

``_pick_representatives`` below is copied unchanged from HU-xiaobai/xMemory
``evaluation/locomo/xMemory_search_framework.py`` (commit 375ae1495095aa14a39eb169f83737f4779391c6,
lines 262-463), with only its ``self`` parameter removed, the indentation of a method undone and its English
docstring made raw (it holds ``\\cup``, an invalid escape otherwise).
``authors_select`` adapts our ragged arrays to it: candidate ids are the local positions as
strings, in position order (Stage I passes candidates by descending relevance, as the authors'
call sites do), and the picks are cut to the budget as their call site does
(``theme_rep_ids[:K_max_theme]``), which also turns their "at least one" fallback into no pick for
a budget of 0.
"""

# ruff: noqa
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import numpy as np


def _pick_representatives(
    candidate_ids: List[str],
    neighbor_map: Dict[str, List[Tuple[str, float]]],
    base_scores: Optional[Dict[str, float]] = None,
    max_representatives: Optional[int] = None,
    coverage_ratio: float = 1.0,
    alpha_coverage: float = 0.7,
) -> List[str]:
    r"""
    Use `candidate_ids` plus adjacency information (with similarity scores) to perform **representative node selection via greedy coverage + node scoring**.

    ### Inputs

    * `candidate_ids`: candidate nodes considered in this round (e.g., top-50 themes / semantics)
    * `neighbor_map`: node -> `[(neighbor_id, sim), ...]`, where `sim` is node–node similarity
    * `base_scores`: node-to-query scores (e.g., query–node cosine similarity)

    ### Design

    * For each node (i), define its coverage set:
      [
      C(i) = {i} \cup {\text{neighbors of } i \text{ within the candidate set}}
      ]

    * Let (U) be the current set of **uncovered** nodes.

    * Define the weighted coverage gain:
      [
      \text{coverage_gain_weight}(i) = \sum_{u \in C(i)\cap U} \text{sim}(i,u)
      ]
      (weighted by neighbor similarity)

    * Normalize it to ([0,1]):
      [
      \text{coverage_gain_score}(i) = \frac{\text{coverage_gain_weight}(i)}{\text{total_weight}}
      ]

    * Normalize the node’s own `base_score` to ([0,1]), denoted as `node_norm_score`.

    * Combined objective:
      [
      \text{objective}(i)=\alpha_{\text{coverage}} \cdot \text{coverage_gain_score}(i)
      +(1-\alpha_{\text{coverage}})\cdot \text{node_norm_score}(i)
      ]

    ### Greedy selection procedure

    At each iteration, select the node with the highest `objective(i)` as the next representative, until one of the following stops the process:

    * coverage ratio (\ge) `coverage_ratio`, or
    * number of representatives reaches `max_representatives`, or
    * no additional coverage gain is available.

    ### Fallback behavior

    * If `base_scores` is empty, use only edge similarities for coverage gain.
    * If `neighbor_map` is nearly empty, the method degenerates to **purely base-score-based top-k selection**.
    """
    """
    使用 candidate_ids + 邻接信息（带 sim） 做“贪心覆盖 + 节点打分”的代表节点选择：

    数据：
      - candidate_ids: 本轮要考虑的候选节点（例如 top-50 theme / semantic）
      - neighbor_map:  节点 -> [(neighbor_id, sim), ...]，sim 是 node-node 相似度
      - base_scores:   节点对 query 的分数（例如 query–node cos 相似度）

    设计：
      - 每个节点 i 的覆盖集合 C(i) = {i} ∪ (候选集内的邻居)
      - 当前未覆盖的集合为 U
      - coverage_gain_weight = ∑_{u ∈ C(i) ∩ U} sim(i,u)   （邻居 sim 加权）
      - 再归一化到 [0,1]：coverage_gain_score = coverage_gain_weight / total_weight

      - 节点自身的 base_score 归一化到 [0,1]，记为 node_norm_score

      - 综合目标：
            objective(i) = alpha_coverage * coverage_gain_score
                           + (1 - alpha_coverage) * node_norm_score

    每轮选择 objective 最大的节点作为代表，直到：
      - 覆盖率 >= coverage_ratio，或
      - 代表数达到 max_representatives，或
      - 没有新增覆盖收益。

    若 base_scores 为空，则 coverage_gain 只用 edge sim；若 neighbor_map 几乎为空，退化为
    purely base_scores 的 top-k。
    """
    if not candidate_ids:
        return []

    cand_set: Set[str] = set(candidate_ids)
    covered: Set[str] = set()
    reps: List[str] = []

    # --- 预计算：每个候选在候选集内能覆盖哪些点 + 对应的 sim ---
    neighbors_ids_in_cand: Dict[str, Set[str]] = {}
    neighbors_weight: Dict[str, Dict[str, float]] = {}

    for cid in candidate_ids:
        pairs = neighbor_map.get(cid, []) or []
        ids_set: Set[str] = set()
        weight_dict: Dict[str, float] = {}
        for nid, w in pairs:
            if nid not in cand_set:
                continue
            w_float = float(w)
            if nid in weight_dict:
                weight_dict[nid] = max(weight_dict[nid], w_float)
            else:
                weight_dict[nid] = w_float
            ids_set.add(nid)

        ids_set.add(cid)
        if cid not in weight_dict:
            weight_dict[cid] = 1.0

        neighbors_ids_in_cand[cid] = ids_set
        neighbors_weight[cid] = weight_dict

    total = len(cand_set)

    # --- 预处理 base_scores ---
    if base_scores is None:
        base_scores = {}

    # 节点自身分数归一化，用于 node_norm_score
    raw_scores: List[float] = [float(base_scores.get(cid, 0.0)) for cid in candidate_ids]
    if raw_scores:
        s_min = min(raw_scores)
        s_max = max(raw_scores)
    else:
        s_min, s_max = 0.0, 0.0

    if s_max > s_min:
        base_scores_norm: Dict[str, float] = {
            cid: (float(base_scores.get(cid, 0.0)) - s_min) / (s_max - s_min) for cid in candidate_ids
        }
    else:
        # 所有分数一样，统一给个 0.5
        base_scores_norm = {cid: 0.5 for cid in candidate_ids}

    # 预估一下所有边的总权重（用于归一化 coverage_gain）
    total_weight = 0.0
    for cid in candidate_ids:
        wdict = neighbors_weight.get(cid, {})
        for nid, w in wdict.items():
            if nid in cand_set:
                if w > 0:
                    total_weight += w

    if total_weight <= 0.0:
        total_weight = 1.0  # 防止除零，退化成只看 node_score

    # --- 贪心选择代表节点 ---
    while len(covered) < total:
        best_id = None
        best_obj = -1.0

        for cid in candidate_ids:
            if cid in reps:
                continue

            # 当前能新增覆盖的节点
            gain_nodes = neighbors_ids_in_cand.get(cid, set()) - covered

            # 1) coverage_gain_score：新增覆盖的这些点的 edge sim 之和
            gain_weight = 0.0
            wdict = neighbors_weight.get(cid, {})
            for nid in gain_nodes:
                gain_weight += float(wdict.get(nid, 0.0))
            coverage_gain_score = gain_weight / total_weight

            # 2) 节点自身的归一化 query 分数
            node_score = base_scores_norm.get(cid, 0.0)

            # 3) 综合目标
            obj = alpha_coverage * coverage_gain_score + (1.0 - alpha_coverage) * node_score

            if obj > best_obj:
                best_obj = obj
                best_id = cid

        if best_id is None or best_obj <= 0.0:
            # 没有任何节点能带来新增覆盖 + 分数收益，退出
            break

        reps.append(best_id)
        covered |= neighbors_ids_in_cand.get(best_id, set())

        if max_representatives is not None and len(reps) >= max_representatives:
            break

        if coverage_ratio < 1.0 and total > 0:
            if len(covered) / total >= coverage_ratio:
                break

    if not reps:
        # 极端情况下兜个底：至少返回一个
        reps = [candidate_ids[0]]

    return reps


def authors_select(cand_offsets, nbr_idx, nbr_w, relevance, alpha, budgets, target) -> list[list[int]]:
    """Per query, the authors' picks (local positions, pick order) for our ragged inputs."""
    out = []
    for q in range(len(cand_offsets) - 1):
        s, e = int(cand_offsets[q]), int(cand_offsets[q + 1])
        ids = [str(i) for i in range(e - s)]
        nbr = {}
        for i in range(e - s):
            nbr[ids[i]] = [
                (str(int(u)), float(w)) for u, w in zip(nbr_idx[s + i], nbr_w[s + i]) if int(u) >= 0
            ]
        base = {ids[i]: float(relevance[s + i]) for i in range(e - s)}
        budget = int(budgets[q])
        reps = _pick_representatives(
            ids,
            nbr,
            base,
            max_representatives=budget,
            coverage_ratio=float(target),
            alpha_coverage=float(alpha),
        )
        out.append([int(r) for r in reps[: max(budget, 0)]])
    return out
