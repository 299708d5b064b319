"""Classification metrics and the baselines every model is reported beside.

Baselines (majority class; TF-IDF 1-2 grams + logistic regression) are trained on exactly
the training rows the model saw and scored on the same validation and test rows.
"""

from __future__ import annotations

import numpy as np


def scores(labels: np.ndarray | list[int], positive_prob: np.ndarray | list[float]) -> dict[str, float]:
    """accuracy, F1 (positive class = id 1) and ROC AUC from positive-class probabilities."""
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

    y = np.asarray(labels)
    p = np.asarray(positive_prob, dtype=np.float64)
    pred = (p >= 0.5).astype(int)
    auc = float(roc_auc_score(y, p)) if len(np.unique(y)) == 2 else float("nan")
    return {
        "accuracy": float(accuracy_score(y, pred)),
        "f1": float(f1_score(y, pred, zero_division=0)),
        "auc": auc,
    }


def baselines(
    train_texts: list[str],
    train_labels: list[int],
    evals: dict[str, tuple[list[str], list[int]]],
    seed: int = 0,
) -> dict[str, dict[str, dict[str, float]]]:
    """{"majority": {split: scores}, "tfidf_logreg": {split: scores}} for each split in ``evals``."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(train_labels)
    majority = int(np.bincount(y, minlength=2).argmax())
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True)
    x = vectorizer.fit_transform(train_texts)
    clf = LogisticRegression(max_iter=1000, C=4.0, random_state=seed).fit(x, y)
    out: dict[str, dict[str, dict[str, float]]] = {"majority": {}, "tfidf_logreg": {}}
    for split, (texts, labels) in evals.items():
        out["majority"][split] = scores(labels, np.full(len(labels), float(majority)))
        out["tfidf_logreg"][split] = scores(labels, clf.predict_proba(vectorizer.transform(texts))[:, 1])
    return out
