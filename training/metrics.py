"""Classification metrics and the baselines every model is reported beside.

Baselines (majority class; TF-IDF 1-2 grams + logistic regression) are trained on exactly
the training rows the model saw and scored on the same validation and test rows.

Two classes: F1 and AUC of the positive class (id 1), as always. Three or more: F1 is the macro
average over the classes (a rare class weighs as much as a common one: a router that never predicts
it loses F1) and AUC the macro average of one-vs-rest AUCs over the classes present in the labels.
"""

from __future__ import annotations

import numpy as np


def scores(
    labels: np.ndarray | list[int], probs: np.ndarray | list[float] | list[list[float]]
) -> dict[str, float]:
    """accuracy, F1 and ROC AUC from class probabilities: a (rows, classes) matrix, or a vector of
    positive-class probabilities for two classes."""
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

    y = np.asarray(labels)
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim == 1 or p.shape[1] == 2:
        positive = p if p.ndim == 1 else p[:, 1]
        pred = (positive >= 0.5).astype(int)
        auc = float(roc_auc_score(y, positive)) if len(np.unique(y)) == 2 else float("nan")
        return {
            "accuracy": float(accuracy_score(y, pred)),
            "f1": float(f1_score(y, pred, zero_division=0)),
            "auc": auc,
        }
    pred = p.argmax(axis=1)
    classes = range(p.shape[1])
    # One-vs-rest per class present in this split (a class absent from a small split has no AUC).
    present = [c for c in classes if 0 < int(np.sum(y == c)) < len(y)]
    auc = float(np.mean([roc_auc_score(y == c, p[:, c]) for c in present])) if present else float("nan")
    return {
        "accuracy": float(accuracy_score(y, pred)),
        # Over the classes in the labels or the predictions: a class absent from both has no F1 to average.
        "f1": float(f1_score(y, pred, labels=sorted(set(y) | set(pred)), average="macro", zero_division=0)),
        "auc": auc,
    }


def baselines(
    train_texts: list[str],
    train_labels: list[int],
    evals: dict[str, tuple[list[str], list[int]]],
    seed: int = 0,
    num_classes: int = 2,
) -> dict[str, dict[str, dict[str, float]]]:
    """{"majority": {split: scores}, "tfidf_logreg": {split: scores}} for each split in ``evals``."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(train_labels)
    majority = int(np.bincount(y, minlength=num_classes).argmax())
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True)
    x = vectorizer.fit_transform(train_texts)
    clf = LogisticRegression(max_iter=1000, C=4.0, random_state=seed).fit(x, y)
    out: dict[str, dict[str, dict[str, float]]] = {"majority": {}, "tfidf_logreg": {}}
    for split, (texts, labels) in evals.items():
        # predict_proba's columns are the classes seen in training (clf.classes_), not always every class id.
        probs = np.zeros((len(labels), num_classes))
        probs[:, clf.classes_] = clf.predict_proba(vectorizer.transform(texts))
        constant = np.zeros((len(labels), num_classes))
        constant[:, majority] = 1.0
        out["majority"][split] = scores(labels, constant)
        out["tfidf_logreg"][split] = scores(labels, probs)
    return out
