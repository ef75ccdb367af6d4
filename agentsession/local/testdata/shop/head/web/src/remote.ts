import type { Cart } from "./api";

export class RemoteCart {
  constructor(private readonly baseUrl: string) {}

  async load(id: string): Promise<Cart> {
    const res = await fetch(`${this.baseUrl}/carts/${id}`);
    return (await res.json()) as Cart;
  }

  async save(cart: Cart): Promise<void> {
    await fetch(`${this.baseUrl}/carts/${cart.id}`, { method: "PUT", body: JSON.stringify(cart) });
  }
}
