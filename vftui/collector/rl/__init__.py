"""rl (Atropos ``serve``): rollouts through a ManagedServer with token logprobs, groups to the trajectory API."""
