"""Measurements on the emulator: what the module costs and how it behaves, side by side and rerunnable."""
