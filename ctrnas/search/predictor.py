"""A learned performance predictor that picks which of many mutants get scored (predictor-guided evolution).

BANANAS (White et al., AAAI 2021) and NASLib's predictor search: evolution proposes `pool` mutants per
child it may train, a model fitted on everything scored so far predicts each one, and the best by an
acquisition (the predicted value plus `kappa` times the model's spread, toward better) are scored. White
et al. ("How Powerful are Performance Predictors in NAS?", NeurIPS 2021) and NAS-Bench-Suite-Zero find
that zero-cost proxies are poor rankers alone and strong *features* of a model-based predictor: the
caller's `featurize(arch)` gives the architecture's features (op counts, widths; GRAF's role) and, for the
CTR search, SiGeo, ZiCo, NASWOT, parameters and FLOPs, whose sign and weight the model learns on the
user's own data.

Model: scikit-learn's `RandomForestRegressor`. Trees need no scaling of proxies that span orders of
magnitude, ignore useless columns, fit in milliseconds on tens of rows, and the spread of the trees'
predictions is the uncertainty the acquisition needs (BANANAS uses an ensemble for the same purpose).

A multi-fidelity search scores candidates at several rungs whose values are not comparable: the model is
fitted on the deepest rung with at least `min_train` finite scores, and predicts that rung. Every
prediction made for a candidate before it is scored is kept, so the run can report Kendall's tau of the
predictor on candidates it had not seen (`report`).

`relative`: the model learns what an edit does instead of what an arch scores: its target is a child's
score minus its parent's at the same rung, its inputs the change of the child's features from the
parent's, and a proposal's prediction is its parent's score plus the predicted change. Children that start from their
line's weights (`fitness: inherit`) differ far more between lines than between the edits of one line, and
a forest on absolute features spends its few rows learning the lines. The report gives, in both modes, the
tau of the predicted against the actual change from the parent (`unseen_change_tau`): how well the
predictor ranks the edits themselves, which a tau over several lines can hide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ctrnas.errors import RecipeError


@dataclass(frozen=True)
class PredictorConfig:
    """pool: mutants proposed per child to score (0: no predictor, evolution as before); kappa: weight of
    the trees' spread in the acquisition; min_train: scores at a rung before its model is used (in `relative`
    mode: children scored there whose parent was too); trees: the forest's size."""

    pool: int = 0
    kappa: float = 0.5
    min_train: int = 8
    trees: int = 100
    # zero-cost proxies the caller scores as features (the CTR pipeline: registry names on the warmed-up
    # supernet); empty: the architecture's own features, parameters and FLOPs only
    proxies: tuple[str, ...] = ("sigeo", "zico", "naswot")
    # learn each child's change from its parent's score (module docstring), not its score
    relative: bool = False

    def __post_init__(self) -> None:
        if self.pool < 0 or self.pool == 1:
            raise RecipeError("search.predictor", "pool", f"expected 0 (off) or >= 2, got {self.pool}")
        if self.kappa < 0:
            raise RecipeError("search.predictor", "kappa", f"expected >= 0, got {self.kappa}")
        if self.min_train < 2:
            raise RecipeError("search.predictor", "min_train", f"expected >= 2, got {self.min_train}")
        if self.trees < 1:
            raise RecipeError("search.predictor", "trees", f"expected >= 1, got {self.trees}")


def kendall_tau(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b of two equally long lists (NaN with fewer than 3 pairs or a constant list)."""
    from ctrnas.search.ranking import point_correlation

    return point_correlation(x, y, "kendall") if len(x) >= 3 else math.nan


class Predictor:
    """Fits on scored candidates (`observe`), chooses among proposals (`choose`), reports its accuracy.

    `featurize(arch) -> {name: value}` is called once per distinct key. `maximize[r]` is rung r's direction;
    internally every value is a utility, higher is better."""

    def __init__(self, config: PredictorConfig, featurize: Callable[[Any], dict[str, float]],
                 maximize: list[bool], seed: int = 0):
        self.config, self.featurize, self.maximize, self.seed = config, featurize, list(maximize), int(seed)
        self.features: dict[str, dict[str, float]] = {}   # key -> features
        self.scores: list[list[Any]] = []                      # [key, rung, utility]
        self.pending: dict[str, list[Any]] = {}                # "key|rung" -> [predicted utility, spread]
        self.checked: list[list[Any]] = []  # [key, rung, predicted, actual, parent's then]: unseen before scoring
        self.parents: dict[str, str] = {}                      # key -> parent key ("": none)
        self.importances: dict[str, float] = {}
        self._fitted: tuple[Any, tuple[int, Any, list[str]] | None] = (None, None)  # (what it was fitted on, fit)

    # -- data ---------------------------------------------------------------------------------------
    def features_of(self, key: str, arch: Any) -> dict[str, float]:
        if key not in self.features:
            raw = self.featurize(arch)
            self.features[key] = {k: float(v) if v is not None and math.isfinite(float(v)) else 0.0
                                  for k, v in raw.items()}
        return self.features[key]

    def observe(self, key: str, arch: Any, rung: int | None, value: float, parent: str = "") -> None:
        """Record a score (rung None: a single-fidelity search's only rung) of `key`, mutated from `parent`;
        non-finite scores are skipped."""
        r = rung or 0
        if parent:
            self.parents[key] = parent
        if not math.isfinite(value):
            return
        utility = float(value) if self.maximize[r] else -float(value)
        self.features_of(key, arch)
        self.scores.append([key, r, utility])
        guess = self.pending.pop(f"{key}|{r}", None)
        if guess is not None:
            self.checked.append([key, r, guess[0], utility, guess[2] if len(guess) > 2 else None])

    # -- the model ----------------------------------------------------------------------------------
    def _at(self, rung: int) -> dict[str, float]:
        """key -> utility at `rung` (a re-scored key keeps its latest value)."""
        return {key: u for key, r, u in self.scores if r == rung}

    def _inputs(self, key: str, arch: Any, parent: str) -> dict[str, float]:
        """The model's inputs: the features, or in `relative` mode their change from the parent's. Only the
        change: with the ten or so children a search trains, a forest cannot also learn where an edit helps,
        and the absolute features only dilute its splits (tests/search/test_relative_predictor.py's toy)."""
        own = self.features_of(key, arch)
        if not self.config.relative:
            return own
        base = self.features.get(parent, {})
        return {f"change:{n}": own.get(n, 0.0) - base.get(n, 0.0) for n in {*own, *base}}

    def _rows(self, rung: int) -> dict[str, float]:
        """The training targets at `rung`: scores, or in `relative` mode each child's change from its
        parent's score (children whose parent has none at that rung are left out)."""
        at = self._at(rung)
        if not self.config.relative:
            return at
        return {k: u - at[p] for k, u in at.items() if (p := self.parents.get(k, "")) in at}

    def _rung(self) -> int | None:
        ready = [r for r in {s[1] for s in self.scores} if len(self._rows(r)) >= self.config.min_train]
        return max(ready) if ready else None

    def _fit(self) -> tuple[int, Any, list[str]] | None:
        """(rung, forest, feature names) fitted on the deepest ready rung, or None. Scores only grow and the
        forest's seed counts them, so the same scores (and parents, which relative rows read) give the same
        forest: it is fitted again only when they changed."""
        on = (len(self.scores), tuple(self.parents.items()) if self.config.relative else None)
        if self._fitted[0] != on:
            self._fitted = (on, self._refit())
        return self._fitted[1]

    def _refit(self) -> tuple[int, Any, list[str]] | None:
        from sklearn.ensemble import RandomForestRegressor

        rung = self._rung()
        if rung is None:
            return None
        rows = self._rows(rung)
        inputs = {k: self._inputs(k, None, self.parents.get(k, "")) for k in rows}
        names = sorted({n for k in rows for n in inputs[k]})
        x = np.array([[inputs[k].get(n, 0.0) for n in names] for k in rows])
        y = np.array(list(rows.values()))
        # leaves of 2 rows smooth the noise of scores; an edit is mostly seen once, so a relative model whose
        # leaves needed 2 rows could not split at all (it predicted one constant change for every edit)
        forest = RandomForestRegressor(n_estimators=self.config.trees,
                                       min_samples_leaf=1 if self.config.relative else 2,
                                       random_state=self.seed + len(self.scores))
        forest.fit(x, y)
        self.importances = dict(sorted(zip(names, map(float, forest.feature_importances_)),
                                       key=lambda t: -t[1]))
        return rung, forest, names

    def choose(self, proposals: list[tuple[str, Any]], k: int, parents: list[str] | None = None) -> list[int] | None:
        """Indices of the k proposals ((key, arch) pairs, mutated from `parents`' keys) with the best
        acquisition, or None while no rung has `min_train` scores (the caller then keeps its own default).
        In `relative` mode (which needs `parents`) a proposal whose parent has no score at the fitted rung is
        placed at the rung's worst score plus its predicted change: such a parent stopped below that rung."""
        if self.config.relative and parents is None:
            raise ValueError("a relative predictor needs each proposal's parent key")
        fitted = self._fit()
        if fitted is None:
            return None
        rung, forest, names = fitted
        parents = parents or [""] * len(proposals)
        at = self._at(rung)
        x = np.array([[self._inputs(key, arch, p).get(n, 0.0) for n in names]
                      for (key, arch), p in zip(proposals, parents, strict=True)])
        # the forest's own predict reads float32 and skips each tree's input checks; so does this, per tree
        x = np.ascontiguousarray(x, dtype=np.float32)
        per_tree = np.stack([t.predict(x, check_input=False) for t in forest.estimators_])
        mean, spread = per_tree.mean(axis=0), per_tree.std(axis=0)
        if self.config.relative:
            worst = min(at.values())
            mean = mean + np.array([at.get(p, worst) for p in parents])
        acquisition = mean + self.config.kappa * spread
        order = sorted(range(len(proposals)), key=lambda i: (-acquisition[i], i))[:k]
        for i in order:
            self.parents[proposals[i][0]] = parents[i]
            self.pending[f"{proposals[i][0]}|{rung}"] = [float(mean[i]), float(spread[i]), at.get(parents[i])]
        return order

    def report(self) -> dict[str, Any]:
        """Kendall's tau of the predictions made before scoring against the scores (per rung, and their
        count-weighted mean), how many, and the last model's feature importances. Beside it, on the candidates
        whose parent had a score: the tau of the predicted change from the parent's score, and the tau of the
        parent's score itself (a predictor that only knows the parents would get that much)."""
        per_rung = {}
        for r in sorted({c[1] for c in self.checked}):
            rows = [c for c in self.checked if c[1] == r]
            # the edits themselves: predicted against actual change from the parent's score at prediction time
            based = [c for c in rows if len(c) > 4 and c[4] is not None]
            per_rung[str(r)] = {"n": len(rows), "tau": kendall_tau([c[2] for c in rows], [c[3] for c in rows]),
                                "change_n": len(based),
                                "change_tau": kendall_tau([c[2] - c[4] for c in based], [c[3] - c[4] for c in based]),
                                # the naive guess "a child scores as its parent" on the same candidates: what
                                # a tau gets from the gaps between parents alone
                                "parent_tau": kendall_tau([c[4] for c in based], [c[3] for c in based])}

        def pooled(tau: str, n: str) -> float:  # count-weighted mean over rungs (their values are not comparable)
            usable = [(v[tau], v[n]) for v in per_rung.values() if math.isfinite(v[tau])]
            return sum(t * k for t, k in usable) / sum(k for _, k in usable) if usable else math.nan

        return {"model": "scikit-learn RandomForestRegressor", "trees": self.config.trees,
                "pool": self.config.pool, "kappa": self.config.kappa, "relative": self.config.relative,
                "unseen_tau": pooled("tau", "n"), "unseen_n": len(self.checked), "per_rung": per_rung,
                "unseen_change_tau": pooled("change_tau", "change_n"),
                "unseen_change_n": sum(v["change_n"] for v in per_rung.values()),
                "unseen_parent_tau": pooled("parent_tau", "change_n"),
                "scored": len(self.scores), "importances": dict(self.importances)}

    # -- checkpoints (plain data: JSON-ready) --------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"features": self.features, "scores": self.scores, "pending": self.pending,
                "checked": self.checked, "importances": self.importances, "parents": self.parents}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.features = {k: dict(v) for k, v in state["features"].items()}
        self.scores = [list(s) for s in state["scores"]]
        self.pending = {k: list(v) for k, v in state["pending"].items()}
        self.checked = [list(c) for c in state["checked"]]
        self.importances = dict(state["importances"])
        self.parents = dict(state.get("parents", {}))  # a checkpoint from before `relative`
        self._fitted = (None, None)
