"""Talks to the shop's API."""
from app.retry import retry


class Client:
    def __init__(self, base_url):
        self.base_url = base_url

    def get(self, path):
        return {"url": self.base_url + path}


@retry
def fetch_user(client, user_id):
    return client.get("/users/" + str(user_id))


@retry
def fetch_order(client, order_id):
    return client.get("/orders/" + str(order_id))
