"""Builds reports."""
from app.client import Client, fetch_user, fetch_order


def user_report(client, user_id):
    user = fetch_user(client, user_id)
    return f"user {user['url']}"


def order_report(client, order_id):
    order = fetch_order(client, order_id)
    return f"order {order['url']}"
