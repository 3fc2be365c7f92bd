"""What every public check refuses before any work: arguments that do not implement the protocols, a map and a claim
(or two maps) that disagree in tokens, dimension or noise, an empty title; and the names reports give them."""

from __future__ import annotations

from .._models import CommonNoise, JointNoise, LayerMap, LimitSDE


def check_protocol(name: str, value: object, protocol: type) -> None:
    if not isinstance(value, protocol):
        raise TypeError(
            f"{name} must implement convergence.{protocol.__name__} (use layer_map / limit_sde), "
            f"got {type(value).__name__}"
        )


def check_pair(first, second, what: str, same_entry_law: bool = True) -> None:
    """Two maps, or a map and its claim, must have the same tokens, dimension and noise (shape and scale; with
    ``same_entry_law`` the entry law too: a claim's noise is Gaussian whatever law the map's entries have)."""
    for attribute in ("tokens", "dim"):
        a, b = getattr(first, attribute, None), getattr(second, attribute, None)
        if a != b:
            raise ValueError(
                f"{what}: the {attribute} must agree: {name_of(first)} and {name_of(second)} need the same "
                f"{attribute}, got {a} and {b}"
            )
    noise_a, noise_b = first.noise, second.noise
    if (noise_a != noise_b) if same_entry_law else _noise_layout(noise_a) != _noise_layout(noise_b):
        rule = "the same law" if same_entry_law else "the same shape and scale"
        raise ValueError(f"{what}: the noises must have {rule}, got {noise_a} and {noise_b}")


def _noise_layout(noise: CommonNoise) -> tuple:
    """A noise's shape and scale, part by part for a joint noise (keys, shapes, scales, tuple or dict): what a map
    and its claim must share when only the entry law may differ."""
    if isinstance(noise, JointNoise):
        return noise.mapping, tuple((key, part.shape, part.scale) for key, part in noise.parts)
    return noise.shape, noise.scale


def name_of(obj: object) -> str:
    """A map's or an SDE's label in reports (its ``name``, else its class)."""
    return getattr(obj, "name", type(obj).__name__)


def check_title(title: object) -> str:
    """A non-empty title (reports are written to a file name made from it, see ``Outcome.write``)."""
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"title must be a non-empty string, got {title!r}")
    return title


def claim_config(who: str, layer: object, sde: object) -> dict[str, str]:
    """Refuse a ``layer`` or ``sde`` that does not implement its protocol, or a pair whose tokens, dimension or noise
    layout differ (``check_pair``; the entry laws may: a claim's noise is Gaussian); the configuration naming both."""
    check_protocol("layer", layer, LayerMap)
    check_protocol("sde", sde, LimitSDE)
    check_pair(layer, sde, who, same_entry_law=False)
    return {"map": name_of(layer), "sde": name_of(sde)}
