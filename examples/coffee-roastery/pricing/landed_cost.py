"""Landed cost per roasted kilogram (the sanctioned computation of landed-cost.md)."""

LB_PER_KG = 2.20462


def landed_cost(green_price_usd_per_lb, freight_usd_per_kg, fees_usd_per_kg,
                warehouse_usd_per_kg, roast_loss_percent, sorting_loss_percent=0.0):
    green_per_kg = (green_price_usd_per_lb * LB_PER_KG + freight_usd_per_kg
                    + fees_usd_per_kg + warehouse_usd_per_kg)
    roasted = green_per_kg / (1 - roast_loss_percent / 100)
    sorted_ = roasted / (1 - sorting_loss_percent / 100)
    return round(sorted_, 2)
