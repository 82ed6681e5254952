"""The documentation's tests: links, anchors, the README's layout and its Inputs and Outputs tables. No fixture of their
own.
"""
