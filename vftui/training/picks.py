"""What a token of a token export can be ranked and colored by (``vftui tokens --by``): light, so the
CLI's choices need no numpy."""

# what a token can be ranked and colored by: the column, and how its value becomes "worse"
PICKS: dict[str, tuple[str, str]] = {
    "mismatch_kl": ("mismatch_kl", "value"),
    "log_ratio": ("log_importance_ratio", "abs"),
    "prob_delta": ("prob_delta", "abs"),
    "entropy": ("entropy", "value"),
    "advantage": ("advantages", "abs"),
    "masked": ("is_masked", "value"),
    "sampler_logprob": ("inference_logprobs", "negated"),  # the least likely sampled tokens first
}
