"""The floor beneath the others: what every package may use, importing none of them."""
