"""Models: Study A's ResNet-50, its init schemes and weights file; Study B's block decompositions."""
