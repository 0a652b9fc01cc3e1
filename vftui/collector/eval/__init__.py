"""eval (Atropos ``evaluate``): sft's collection on the eval split, scored as an evaluation."""
