"""pytest plugin: run scikit-learn's array-API tests with ug_core as a namespace (its tests list
the namespaces they run on in sklearn.utils._array_api; this adds ug beside array_api_strict).

Load with `-p ug_sklearn_plugin` (this directory on PYTHONPATH), SCIPY_ARRAY_API=1; see
tests/test_sklearn_array_api.py, which runs a sample in CI, for the command.
UG_SK_NS picks the namespaces the tests are parametrized with (comma-separated, default
"array_api_strict,ug_core"); ug_core yields device "cpu" (or $UG_SK_DEVICE) with float64 and
float32, as array_api_strict yields CPU_DEVICE/float64 and device1/float32.
The patch happens at plugin load, before sklearn's test modules import the generators.
"""
import os

import sklearn.utils._array_api as _aa

NAMESPACES = [n for n in os.environ.get("UG_SK_NS", "array_api_strict,ug_core").split(",") if n]
UG_DEVICE = os.environ.get("UG_SK_DEVICE", "cpu")
_orig_combos = _aa.yield_namespace_device_dtype_combinations


def yield_namespaces(include_numpy_namespaces=True):
    for ns in NAMESPACES:
        if not include_numpy_namespaces and ns in _aa._NUMPY_NAMESPACE_NAMES:
            continue
        yield ns


def yield_namespace_device_dtype_combinations(include_numpy_namespaces=True):
    for ns in yield_namespaces(include_numpy_namespaces):
        if ns == "ug_core":
            yield ns, UG_DEVICE, "float64"
            yield ns, UG_DEVICE, "float32"
        elif ns == "array_api_strict":
            yield ns, "CPU_DEVICE", "float64"
            yield ns, "device1", "float32"
        else:
            yield ns, None, None


_aa.yield_namespaces = yield_namespaces
_aa.yield_namespace_device_dtype_combinations = yield_namespace_device_dtype_combinations


# estimator_checks runs check_array_api_same_namespace with array_namespace="array_api_strict"
# hardcoded ("only one namespace to keep costs down"): run it with each selected namespace.
import functools  # noqa: E402

import sklearn.utils.estimator_checks as _ec  # noqa: E402

_orig_yield_array_api_checks = _ec._yield_array_api_checks


def _yield_array_api_checks(estimator, only_numpy=False):
    for check in _orig_yield_array_api_checks(estimator, only_numpy=only_numpy):
        if (
            isinstance(check, functools.partial)
            and check.func is _ec.check_array_api_same_namespace
        ):
            for ns in yield_namespaces(include_numpy_namespaces=False):
                yield functools.partial(
                    _ec.check_array_api_same_namespace,
                    array_namespace=ns,
                    device_name=UG_DEVICE if ns == "ug_core" else None,
                )
        else:
            yield check


_ec._yield_array_api_checks = _yield_array_api_checks


# Mixed-namespace inputs (y and sample_weight from another namespace than X): sklearn's own pairs
# need torch/cupy; with ug_core selected and UG_SK_MIXED=1, add pairs between ug, numpy and
# array_api_strict (extra coverage: nothing array_api_strict passes corresponds to them).
_orig_mixed = _aa.yield_mixed_namespace_input_permutations


def yield_mixed_namespace_input_permutations():
    yield from _orig_mixed()
    if "ug_core" in NAMESPACES and os.environ.get("UG_SK_MIXED") == "1":
        NaD = _aa.NamespaceAndDevice
        ug = NaD("ug_core", UG_DEVICE)
        yield NaD("numpy", None), ug, f"numpy to ug_core {UG_DEVICE}"
        yield ug, NaD("numpy", None), f"ug_core {UG_DEVICE} to numpy"
        yield NaD("array_api_strict", "device1"), ug, f"array_api_strict to ug_core {UG_DEVICE}"
        # (not ug -> array_api_strict: its int64 sample_weight fails in multilabel_confusion_matrix
        # the same way from numpy, "int64 and float64 cannot be type promoted", a sklearn issue)


_aa.yield_mixed_namespace_input_permutations = yield_mixed_namespace_input_permutations
_ec.yield_mixed_namespace_input_permutations = yield_mixed_namespace_input_permutations
