"""vftui's own environments, played by the simulated endpoint: v1 tasksets, and their classic twins (verifiers 0.3)."""
