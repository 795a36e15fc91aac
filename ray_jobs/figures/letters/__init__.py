"""Reading panel labels: which letter (or number) a label crop shows.

Pairing by reading order fails whenever a figure is lettered down columns, skips a letter, or
the detector splits or merges a panel; the letter a panel shows says which subcaption is its
own. A tiny CNN, trained on labels the synthetic generator draws, reads the detector's label
crops.
"""
