# SPDX-License-Identifier: MIT
"""mace-torch models saved with cuEquivariance layouts, read without cuEquivariance.

mace-torch's convert_e3nn_cueq (and training with --enable_cueq) replaces a model's e3nn
linears, tensor products and symmetric contractions by cuequivariance_torch modules. Their
weights are the same numbers as e3nn's in the same order, except the symmetric contraction's,
which cuEquivariance expresses in its own basis of the contraction. That basis is not code but
data, pickled with the module: the contraction's polynomial (cuequivariance's
EquivariantPolynomial) lists, for each degree, the paths (weight segment, input components,
output component, coefficient) of its segmented tensor product.

So a cueq model is read here in three steps, none of which imports cuEquivariance:

1. load_with_stubs: the pickle is loaded with placeholder classes for cuequivariance's and
   cuequivariance_torch's (their instances keep their pickled fields as attributes; modules
   keep their parameters and buffers), where those packages are not installed;
2. e3nn_twin: mace-torch builds the e3nn model of the same configuration
   (extract_config_mace_model, as mace-torch's own convert_cueq_e3nn does), and every tensor
   but the contractions' is copied by name;
3. each symmetric contraction of the twin gets cuEquivariance's basis as its U tensors (the
   paths, symmetrised over the input components) and cuEquivariance's weights unchanged.
   mace-torch's e3nn contraction contracts whatever U it holds, and so does fastmlip's (the U
   tensors are written to the file as data), so the twin evaluates as the cueq model did,
   without a change of basis.

The same code reads the real classes where cuEquivariance is installed: it uses only fields
that both the real objects and the placeholders carry. Anything that does not fit the pattern
above (another layout, another segment shape, a weight shared between output irreps) is
refused by name rather than guessed.
"""
import pickle
import re
import types

CUEQ_MODULES = ("cuequivariance", "cuequivariance_torch", "cuequivariance_ops_torch")


class CueqLayoutError(Exception):
    """The cueq model is not laid out as this module reads (the caller refuses it)."""


class TwinBuildError(Exception):
    """mace-torch could not extract the model's configuration or build its e3nn form from it
    (the caller refuses it). Only those two calls are caught: an error of this module's own
    reading is a bug to report, not a refusal."""


def is_cueq_module_name(name):
    return any(name == m or name.startswith(m + ".") for m in CUEQ_MODULES)


# --- 1. unpickling without cuEquivariance ----------------------------------------------------


class _StubMeta(type):
    """Class-level attribute access on a placeholder (how an Enum member is unpickled:
    getattr(IrrepsLayout, "ir_mul")) gives a named token."""

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Token(f"{cls.__name__}.{name}")


class _Token(str):
    """An enum member of a placeholder class, e.g. "IrrepsLayout.ir_mul"."""


class _Stub(metaclass=_StubMeta):
    """A placeholder for a cuequivariance data class: its constructor arguments in `args`
    (what __reduce__ / __newobj__ passed), its pickled state as attributes."""

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.args, obj.kwargs = args, kwargs
        return obj

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2 and (state[0] is None or isinstance(state[0], dict)):
            state = dict(state[0] or {}, **(state[1] or {}))  # (__dict__, __slots__) state
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self.__dict__["state"] = state

    def __str__(self):
        if "_mulirreps" in self.__dict__:  # cue.Irreps: what mace-torch's config extraction reads
            return irreps_text(self)
        return object.__repr__(self)


def _stub_class(module, name):
    import torch

    if module.startswith("cuequivariance_torch"):
        meta = type("_StubModuleMeta", (_StubMeta, type(torch.nn.Module)), {})

        def __init__(self, *args, **kwargs):  # pylint: disable=unused-argument
            torch.nn.Module.__init__(self)

        cls = meta(name, (torch.nn.Module,), {"__init__": __init__})
    else:
        cls = type(name, (_Stub,), {})
    cls.__module__ = module  # so that uses_cueq() and messages see where it came from
    cls.fastmlip_placeholder = True
    return cls


def _stub_pickle_module():
    """A pickle module for torch.load whose Unpickler makes placeholders for cuEquivariance's
    classes and resolves everything else as usual."""
    made = {}

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if is_cueq_module_name(module):
                if (module, name) not in made:
                    made[(module, name)] = _stub_class(module, name)
                return made[(module, name)]
            return super().find_class(module, name)

    mod = types.ModuleType("fastmlip_cueq_pickle")
    mod.Unpickler = Unpickler
    mod.load = pickle.load
    mod.__name__ = "fastmlip_cueq_pickle"
    return mod


def load_with_stubs(path):
    """torch.load of a mace-torch .model whose cuEquivariance classes are not installed."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=False, pickle_module=_stub_pickle_module())
    except TypeError:  # torch without the weights_only argument
        return torch.load(path, map_location="cpu", pickle_module=_stub_pickle_module())


# --- reading cuequivariance's fields (real objects or placeholders alike) ----------------------


def _text(obj):
    """A cuequivariance str subclass (Subscripts) or an enum member, as text."""
    if isinstance(obj, _Stub):
        if obj.args and isinstance(obj.args[0], str):
            return obj.args[0]
        return str(obj.__dict__.get("state", ""))
    if isinstance(obj, str):
        return str.__str__(obj)
    return getattr(obj, "name", str(obj))


def _mulirreps(irreps):
    if "_mulirreps" not in vars(irreps):
        raise CueqLayoutError(f"an Irreps ({type(irreps).__name__}) without its (mul, irrep) list")
    return [(int(mi.mul), int(mi.ir.l), int(mi.ir.p)) for mi in irreps._mulirreps]  # pylint: disable=protected-access


def irreps_text(irreps):
    """e3nn's string of a cue.Irreps of O(3) irreps ("6x0e+6x1o")."""
    return "+".join(f"{mul}x{l}{'e' if p == 1 else 'o'}" for mul, l, p in _mulirreps(irreps))


# --- 2. and 3. the e3nn twin ---------------------------------------------------------------


def _drop_ones(shape):
    return tuple(d for d in shape if d != 1)


def e3nn_twin(model, build):
    """The e3nn model of `model`'s configuration with `model`'s weights, the symmetric
    contractions in cuEquivariance's basis. build(config) makes the e3nn model."""
    import torch

    from mace.tools.scripts_utils import extract_config_mace_model  # pylint: disable=import-outside-toplevel

    try:
        config = extract_config_mace_model(model)
    except (KeyError, AttributeError, TypeError) as e:
        raise TwinBuildError(f"extract_config_mace_model: {type(e).__name__}: {e}") from e
    if config.get("error"):  # what mace-torch's own conversion would stop on
        raise CueqLayoutError(f"mace-torch's extract_config_mace_model cannot read it: {config['error']}")
    config.pop("cueq_config", None)
    dtype = next(model.parameters()).dtype
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        twin = build(config)
    except (KeyError, AttributeError, TypeError) as e:
        raise TwinBuildError(f"the e3nn model's constructor: {type(e).__name__}: {e}") from e
    finally:
        torch.set_default_dtype(default)

    contraction = re.compile(r"products\.\d+\.symmetric_contractions\.")
    source = model.state_dict()
    target = twin.state_dict()
    learned = {name for name, p in twin.named_parameters() if p.numel() > 0}
    values = {}
    for name, tensor in target.items():
        if contraction.match(name):
            continue
        if name not in source:
            # The twin's constant buffers (e3nn's output masks, Wigner 3j blocks) and empty
            # parameters (bias-free linears, a TP with external weights) come from its
            # configuration; a learned tensor must come from the model.
            if name in learned:
                raise CueqLayoutError(f"the e3nn model's learned tensor '{name}' {list(tensor.shape)} has no "
                                      f"counterpart in the cuEquivariance model")
            continue
        value = source[name]
        if tuple(value.shape) != tuple(tensor.shape) and _drop_ones(value.shape) != _drop_ones(tensor.shape):
            raise CueqLayoutError(f"tensor '{name}' has shape {list(value.shape)} in the cuEquivariance model "
                                  f"and {list(tensor.shape)} in its e3nn form")
        values[name] = value.detach().reshape(tensor.shape).to(tensor.dtype)
    # cuequivariance_torch's modules keep constants of their own, in buffers of theirs or of
    # their submodules (the compiled polynomial's coefficients, which the real classes rebuild
    # on loading): not weights of the model.
    cueq_modules = [f"{name}." for name, module in model.named_modules()
                    if name and is_cueq_module_name(type(module).__module__)]
    internal = {name for name, _ in model.named_buffers() if any(name.startswith(p) for p in cueq_modules)}
    unknown = [n for n in source if n not in target and n not in internal and not re.fullmatch(
        r"products\.\d+\.symmetric_contractions\.(weight|projection)", n)]
    if unknown:
        raise CueqLayoutError(f"the cuEquivariance model holds tensors its e3nn form does not: {unknown[:5]}")
    for name, value in values.items():
        target[name].copy_(value)

    for i, product in enumerate(model.products):
        _contraction_to_e3nn(i, product.symmetric_contractions, twin.products[i].symmetric_contractions)
    for mine, theirs in zip(twin.interactions, model.interactions):
        mine.avg_num_neighbors = theirs.avg_num_neighbors
    return twin


def _segment_shapes(operand):
    return [tuple(s) for s in operand.segments]


def _contraction_to_e3nn(i, cueq, e3nn):
    """Product i's contraction: cuEquivariance's paths as mace-torch's U tensors (per output
    irrep and degree), its weights as the matching weights_max / weights.j."""
    import numpy as np
    import torch
    from e3nn import o3

    where = f"products.{i}.symmetric_contractions"
    if not type(cueq).__name__ == "SymmetricContraction" or not hasattr(cueq, "etp"):
        raise CueqLayoutError(f"{where} is a {type(cueq).__module__}.{type(cueq).__name__}, "
                              f"not cuequivariance_torch's SymmetricContraction")
    irreps_in, irreps_out = irreps_text(cueq.irreps_in), irreps_text(cueq.irreps_out)
    if o3.Irreps(irreps_in) != o3.Irreps(str(e3nn.irreps_in)) or \
            o3.Irreps(irreps_out) != o3.Irreps(str(e3nn.irreps_out)):
        raise CueqLayoutError(f"{where} maps {irreps_in} -> {irreps_out}; its e3nn form "
                              f"{e3nn.irreps_in} -> {e3nn.irreps_out}")
    weight = cueq.weight.detach()
    projection = getattr(cueq, "projection", None)
    if projection is not None:  # original_mace=True: the weights are projected at every call
        weight = torch.einsum("zau,ab->zbu", weight, projection.detach().to(weight.dtype))
    mul = int(weight.shape[-1])
    poly = cueq.etp.polynomial
    if len(poly.inputs) != 2 or len(poly.outputs) != 1:
        raise CueqLayoutError(f"{where}'s polynomial has {len(poly.inputs)} inputs and {len(poly.outputs)} "
                              f"outputs (expected weights and features in, one output)")
    w_segments, x_segments, o_segments = (_segment_shapes(op) for op in (*poly.inputs, *poly.outputs))
    dim_in = sum(2 * l + 1 for _, l, _ in _mulirreps(cueq.irreps_in))
    out_ls = [l for _, l, _ in _mulirreps(cueq.irreps_out)]  # each output irrep's l
    dim_out = sum(2 * l + 1 for l in out_ls)
    # One segment of `mul` channels per weight and per component (the ir_mul layout with
    # subscripts u): anything else is another layout.
    if set(w_segments + x_segments + o_segments) != {(mul,)} or len(x_segments) != dim_in or \
            len(o_segments) != dim_out or len(w_segments) != weight.shape[1]:
        raise CueqLayoutError(f"{where}'s segments are not one per component of {mul} channels "
                              f"({len(w_segments)} weight, {len(x_segments)} input, {len(o_segments)} output "
                              f"segments for {weight.shape[1]} weights, {dim_in} and {dim_out} components)")
    out_irrep = []  # output component -> (output irrep index, m)
    for k, l in enumerate(out_ls):
        out_irrep += [(k, m) for m in range(2 * l + 1)]

    paths = {}  # (output irrep, degree) -> list of (weight segment, inputs, m, coefficient)
    owner = {}  # weight segment -> (output irrep, degree)
    for operation, stp in poly.operations:
        buffers = tuple(operation.buffers)
        degree = len(buffers) - 2
        subscripts = [_text(s) for _, s in stp.operands_and_subscripts]
        if degree < 1 or buffers != (0,) + (1,) * degree + (2,) or set(subscripts) != {"u"} or \
                _text(stp.coefficient_subscripts) != "":
            raise CueqLayoutError(f"{where} has an operation on buffers {buffers} with subscripts {subscripts} "
                                  f"(expected weights, the features {degree} times, the output; all 'u')")
        for path in stp.paths:
            idx = tuple(int(j) for j in path.indices)
            coefficient = np.asarray(path.coefficients, dtype=np.float64)
            if coefficient.shape != ():
                raise CueqLayoutError(f"{where} has a path with coefficients of shape {coefficient.shape}")
            k, m = out_irrep[idx[-1]]
            if owner.setdefault(idx[0], (k, degree)) != (k, degree):
                raise CueqLayoutError(f"{where}'s weight {idx[0]} is shared by output irreps or degrees "
                                      f"{owner[idx[0]]} and {(k, degree)}")
            paths.setdefault((k, degree), []).append((idx[0], idx[1:-1], m, float(coefficient)))
    unused = sorted(set(range(len(w_segments))) - set(owner))
    if unused:
        raise CueqLayoutError(f"{where}'s weights {unused[:5]} are on no path")

    for k, contraction in enumerate(e3nn.contractions):
        correlation = int(contraction.correlation)
        l = out_ls[k]
        if any(d > correlation for kk, d in paths if kk == k):
            raise CueqLayoutError(f"{where} has degrees above the correlation {correlation}")
        for degree in range(1, correlation + 1):
            entries = paths.get((k, degree), [])
            segments = sorted({e[0] for e in entries})
            column = {s: c for c, s in enumerate(segments)}
            lead = [2 * l + 1] if l > 0 else []
            u = np.zeros(lead + [dim_in] * degree + [len(segments)])
            for segment, inputs, m, coefficient in entries:
                u[((m,) if l > 0 else ()) + inputs + (column[segment],)] += coefficient
            # mace-torch's U tensors are symmetric in the input components (the contraction
            # multiplies the same features); cuEquivariance's paths need not be. The
            # symmetrised tensor contracts to the same polynomial.
            axes = list(range(len(lead), len(lead) + degree))
            u = _symmetrise(u, axes)
            previous = getattr(contraction, f"U_matrix_{degree}")
            if tuple(previous.shape[:-1]) != u.shape[:-1]:
                raise CueqLayoutError(f"{where} output {k} degree {degree}: U of shape {list(u.shape)} where "
                                      f"mace-torch's has {list(previous.shape)}")
            setattr(contraction, f"U_matrix_{degree}", torch.tensor(u, dtype=previous.dtype))
            w = torch.nn.Parameter(weight[:, segments, :].clone().to(previous.dtype))
            if degree == correlation:
                contraction.weights_max = w
                flag = "weights_max_zeroed"
            else:
                # mace-torch's forward pairs weights[j] with U_matrix_{correlation - 1 - j}
                # (its Horner loop runs down from the highest degree); its *_zeroed flags are
                # numbered by degree (weights_{nu - 1}_zeroed is U_matrix_nu's).
                contraction.weights[correlation - 1 - degree] = w
                flag = f"weights_{degree - 1}_zeroed"
            if flag in dict(contraction.named_buffers(recurse=False)):
                setattr(contraction, flag, torch.tensor(not np.any(u != 0)))


def _symmetrise(u, axes):
    import itertools

    import numpy as np

    if len(axes) < 2:
        return u
    total = np.zeros_like(u)
    perms = list(itertools.permutations(axes))
    for perm in perms:
        order = list(range(u.ndim))
        for a, b in zip(axes, perm):
            order[a] = b
        total += np.transpose(u, order)
    return total / len(perms)
