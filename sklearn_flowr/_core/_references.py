"""The FLOWR paper's reference, for the numpydoc References sections."""

FLOWR_REFERENCE = """J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone and
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022"""
