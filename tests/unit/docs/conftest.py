"""The documentation's tests: links, anchors, page lengths, the README's layout and commands, the module's Inputs and
Outputs tables. No fixture of their own.
"""
