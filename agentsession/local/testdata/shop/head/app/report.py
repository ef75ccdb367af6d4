"""Builds reports."""
from app.client import Client, fetch_user


def user_report(client, user_id):
    user = fetch_user(client, user_id)
    return f"user {user['url']}"
