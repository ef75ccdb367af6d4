"""Order reports."""
from app.client import fetch_order


def order_report(client, order_id):
    order = fetch_order(client, order_id)
    return f"order {order['url']}"
