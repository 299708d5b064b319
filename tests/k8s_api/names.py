"""apimachinery's rules for names, labels, annotations, selectors, ports and quantities: what the API server checks
in every object's metadata and in many spec fields, and the OpenAPI schema (kubernetes-validate) does not.

Ported from kubernetes/kubernetes `staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`
(`IsDNS1123Label`, `IsDNS1123Subdomain`, `IsDNS1035Label`, `IsQualifiedName`, `IsValidLabelValue`,
`IsValidPortName`, `IsValidPortNum`, `IsEnvVarName`, `IsConfigMapKey`), `.../apimachinery/pkg/api/validation/
objectmeta.go` (`ValidateAnnotations`, `ValidateObjectMeta`), `.../apimachinery/pkg/apis/meta/v1/validation/
validation.go` (`ValidateLabels`, `ValidateLabelSelector`) and `.../apimachinery/pkg/api/resource/quantity.go`.
Each function returns the API server's messages (empty when accepted).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

# Pulumi's preview placeholders (infra/plan_mocks.py UNKNOWN, the secret envelope): not checkable offline.
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"

DNS1123_LABEL_MAX, DNS1123_SUBDOMAIN_MAX, QUALIFIED_NAME_MAX, LABEL_VALUE_MAX = 63, 253, 63, 63
TOTAL_ANNOTATION_SIZE = 256 * 1024  # TotalAnnotationSizeLimitB
IANA_SVC_NAME_MAX = 15
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_PORT_NAME = re.compile(r"[-a-z0-9]+")
SELECTOR_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}


def known(value: Any) -> bool:
    """False for what a preview cannot know (the unknown sentinel, a secret envelope, a resource reference)."""
    if isinstance(value, dict):
        return SECRET_SIG_KEY not in value
    return value != UNKNOWN


def dns1123_label(value: str) -> list[str]:
    errors = (
        [] if len(value) <= DNS1123_LABEL_MAX else [f"must be no more than {DNS1123_LABEL_MAX} characters"]
    )
    if not _DNS1123_LABEL.fullmatch(value):
        errors.append("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'")
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    errors = (
        []
        if len(value) <= DNS1123_SUBDOMAIN_MAX
        else [f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters"]
    )
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"
        )
    return errors


def dns1035_label(value: str) -> list[str]:
    errors = (
        [] if len(value) <= DNS1123_LABEL_MAX else [f"must be no more than {DNS1123_LABEL_MAX} characters"]
    )
    if not _DNS1035_LABEL.fullmatch(value):
        errors.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with a letter"
        )
    return errors


def path_segment_name(value: str) -> list[str]:
    """apimachinery/pkg/api/validation/path IsValidPathSegmentName (RBAC names, HPA target names)."""
    if value in (".", ".."):
        return [f"may not be {value!r}"]
    return [f"may not contain {c!r}" for c in ("/", "%") if c in value]


def qualified_name(value: str) -> list[str]:
    """IsQualifiedName: `[prefix/]name`, name <= 63 chars, prefix a DNS-1123 subdomain."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional prefix"
        ]
    errors: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {e}" for e in dns1123_subdomain(parts[0])]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errors.append(f"name part must be no more than {QUALIFIED_NAME_MAX} characters")
    if name and not _QUALIFIED_NAME.fullmatch(name):
        errors.append("name part must consist of alphanumeric characters, '-', '_' or '.'")
    return errors


def label_value(value: str) -> list[str]:
    errors = [] if len(value) <= LABEL_VALUE_MAX else [f"must be no more than {LABEL_VALUE_MAX} characters"]
    if not _LABEL_VALUE.fullmatch(value):
        errors.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'"
        )
    return errors


def port_name(value: str) -> list[str]:
    """IsValidPortName (IANA_SVC_NAME, RFC 6335 section 5.1)."""
    errors = (
        [] if len(value) <= IANA_SVC_NAME_MAX else [f"must be no more than {IANA_SVC_NAME_MAX} characters"]
    )
    if not _PORT_NAME.fullmatch(value):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        errors.append("must not contain consecutive hyphens")
    if not re.search("[a-z]", value):
        errors.append("must contain at least one letter (a-z)")
    if value.startswith("-") or value.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def port_num(value: Any, low: int = 1) -> list[str]:
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= 65535
    return [] if ok else [f"must be between {low} and 65535, inclusive"]


def port_num_or_name(value: Any) -> list[str]:
    """ValidatePortNumOrName (probe ports, Service targetPort, NetworkPolicy ports)."""
    return port_name(value) if isinstance(value, str) else port_num(value)


def env_var_name(value: str) -> list[str]:
    """IsEnvVarName, the strict form: clusters without the RelaxedEnvironmentVariableValidation gate (beta and on
    from 1.32) enforce it, and every name this repository renders must run on those too."""
    if _ENV_VAR_NAME.fullmatch(value):
        return []
    return [
        "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.'"
    ]


def config_map_key(value: str) -> list[str]:
    errors = (
        []
        if len(value) <= DNS1123_SUBDOMAIN_MAX
        else [f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters"]
    )
    if not _CONFIG_MAP_KEY.fullmatch(value):
        errors.append("a valid config key must consist of alphanumeric characters, '-', '_' or '.'")
    if value in (".", "..") or value.startswith(".."):
        errors.append("must not be '.' or '..' or start with '..'")
    return errors


def labels(values: Any, path: str) -> list[str]:
    """ValidateLabels: qualified-name keys, label values."""
    errors: list[str] = []
    for key, value in (values or {}).items():
        errors += [f"{path}: Invalid value: {key!r}: {e}" for e in qualified_name(key)]
        if isinstance(value, str) and known(value):
            errors += [f"{path}[{key}]: Invalid value: {value!r}: {e}" for e in label_value(value)]
        elif not isinstance(value, str) and known(value):
            errors.append(f"{path}[{key}]: Invalid value: {value!r}: must be a string")
    return errors


def annotations(values: Any, path: str) -> list[str]:
    """ValidateAnnotations: qualified-name keys (lower-cased), total size <= 256 KiB."""
    errors: list[str] = []
    size = 0
    for key, value in (values or {}).items():
        errors += [f"{path}: Invalid value: {key!r}: {e}" for e in qualified_name(key.lower())]
        size += len(key) + (len(value) if isinstance(value, str) else 0)
    if size > TOTAL_ANNOTATION_SIZE:
        errors.append(f"{path}: Too long: must have at most {TOTAL_ANNOTATION_SIZE} bytes")
    return errors


def label_selector(selector: Any, path: str) -> list[str]:
    """ValidateLabelSelector: matchLabels as labels; matchExpressions' keys, operators and values."""
    if not selector:
        return []
    errors = labels(selector.get("matchLabels"), f"{path}.matchLabels")
    for i, req in enumerate(selector.get("matchExpressions") or []):
        at = f"{path}.matchExpressions[{i}]"
        errors += [f"{at}.key: Invalid value: {e}" for e in qualified_name(req.get("key", ""))]
        op, values = req.get("operator"), req.get("values") or []
        if op not in SELECTOR_OPERATORS:
            errors.append(f"{at}.operator: Invalid value: {op!r}: not a valid selector operator")
        elif op in ("In", "NotIn") and not values:
            errors.append(
                f"{at}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            )
        elif op in ("Exists", "DoesNotExist") and values:
            errors.append(
                f"{at}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
    return errors


def selector_matches(selector: dict[str, Any], target: dict[str, str]) -> bool:
    """Whether a LabelSelector selects these labels (for "`selector` does not match template `labels`")."""
    if any(target.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req["key"], req["operator"], req.get("values") or []
        if (op == "In" and target.get(key) not in values) or (op == "NotIn" and target.get(key) in values):
            return False
        if (op == "Exists") != (key in target) and op in ("Exists", "DoesNotExist"):
            return False
    return True


def object_meta(meta: dict[str, Any], path: str, name_rule: Any, namespaced: bool) -> list[str]:
    """ValidateObjectMeta: the name by the kind's rule, the namespace a DNS label, labels and annotations."""
    errors: list[str] = []
    name = meta.get("name")
    if not name and not meta.get("generateName"):
        errors.append(f"{path}.name: Required value: name or generateName is required")
    elif isinstance(name, str) and known(name):
        errors += [f"{path}.name: Invalid value: {name!r}: {e}" for e in name_rule(name)]
    ns = meta.get("namespace")
    if namespaced and isinstance(ns, str) and known(ns):
        errors += [f"{path}.namespace: Invalid value: {ns!r}: {e}" for e in dns1123_label(ns)]
    if not namespaced and ns:
        errors.append(f"{path}.namespace: Forbidden: not allowed on this type")
    errors += labels(meta.get("labels"), f"{path}.labels")
    return errors + annotations(meta.get("annotations"), f"{path}.annotations")


_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    **{s: Fraction(2 ** (10 * (i + 1))) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
}  # fmt: skip
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?")


def quantity(value: Any) -> Fraction | None:
    """resource.ParseQuantity; None when the string is not a quantity (the API server's 400)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Fraction(value)
    match = _QUANTITY.fullmatch(str(value))
    if not match:
        return None
    number, exponent, suffix = match.groups()
    if exponent is not None:
        return Fraction(number) * Fraction(10) ** int(exponent)
    return Fraction(number) * _SUFFIXES[suffix or ""]


def int_or_percent(value: Any, path: str, max_percent: int | None = 100) -> list[str]:
    """ValidatePositiveIntOrPercent / IsValidPercent (+ the <= 100% cap of maxUnavailable and PDBs)."""
    if isinstance(value, int):
        return [] if value >= 0 else [f"{path}: Invalid value: {value}: must be greater than or equal to 0"]
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]+%", value):
        return [
            f"{path}: Invalid value: {value!r}: a valid percent string must be a numeric string followed by '%'"
        ]
    if max_percent is not None and int(value[:-1]) > max_percent:
        return [f"{path}: Invalid value: {value!r}: must not be greater than {max_percent}%"]
    return []
