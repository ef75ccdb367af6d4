export interface Cart {
  id: string;
  items: string[];
}

export interface CartStore {
  load(id: string): Promise<Cart>;
  save(cart: Cart): Promise<void>;
}

export async function fetchCart(store: CartStore, id: string): Promise<Cart> {
  return store.load(id);
}

export class LocalCart implements CartStore {
  private carts = new Map<string, Cart>();

  async load(id: string): Promise<Cart> {
    return this.carts.get(id) ?? { id, items: [] };
  }

  async save(cart: Cart): Promise<void> {
    this.carts.set(cart.id, cart);
  }
}
