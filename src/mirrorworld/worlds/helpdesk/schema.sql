-- Helpdesk: the contact center of an online retailer.
-- Money is stored in integer cents; times are ISO 8601 UTC text.

CREATE TABLE customers (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    email         TEXT NOT NULL UNIQUE,
    phone         TEXT NOT NULL,
    address       TEXT NOT NULL,
    city          TEXT NOT NULL,
    zip           TEXT NOT NULL,
    tier          TEXT NOT NULL CHECK (tier IN ('standard', 'gold', 'platinum')),
    created_at    TEXT NOT NULL,
    security_pin  TEXT NOT NULL,          -- hidden: never shown to agents
    risk_score    INTEGER NOT NULL        -- hidden: fraud model output, 0..100
);

CREATE TABLE products (
    id                 INTEGER PRIMARY KEY,
    sku                TEXT NOT NULL UNIQUE,
    name               TEXT NOT NULL,
    category           TEXT NOT NULL,
    price_cents        INTEGER NOT NULL CHECK (price_cents > 0),
    return_window_days INTEGER NOT NULL,
    warranty_months    INTEGER NOT NULL
);

CREATE TABLE orders (
    id               INTEGER PRIMARY KEY,
    customer_id      INTEGER NOT NULL REFERENCES customers(id),
    status           TEXT NOT NULL CHECK (status IN ('placed', 'shipped', 'delivered', 'cancelled', 'refunded')),
    placed_at        TEXT NOT NULL,
    shipped_at       TEXT,
    delivered_at     TEXT,
    total_cents      INTEGER NOT NULL,
    shipping_address TEXT NOT NULL
);
CREATE INDEX orders_customer ON orders(customer_id);

CREATE TABLE order_lines (
    id               INTEGER PRIMARY KEY,
    order_id         INTEGER NOT NULL REFERENCES orders(id),
    product_id       INTEGER NOT NULL REFERENCES products(id),
    quantity         INTEGER NOT NULL CHECK (quantity > 0),
    unit_price_cents INTEGER NOT NULL,
    refunded_cents   INTEGER NOT NULL DEFAULT 0 CHECK (refunded_cents >= 0)
);
CREATE INDEX order_lines_order ON order_lines(order_id);

CREATE TABLE teams (
    id    INTEGER PRIMARY KEY,
    name  TEXT NOT NULL,
    queue TEXT NOT NULL UNIQUE,
    tier  INTEGER NOT NULL
);

CREATE TABLE agents (
    id      INTEGER PRIMARY KEY,
    name    TEXT NOT NULL,
    email   TEXT NOT NULL UNIQUE,
    team_id INTEGER NOT NULL REFERENCES teams(id),
    role    TEXT NOT NULL CHECK (role IN ('agent', 'supervisor'))
);

CREATE TABLE tickets (
    id          INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    order_id    INTEGER REFERENCES orders(id),
    channel     TEXT NOT NULL CHECK (channel IN ('email', 'chat', 'phone', 'web')),
    subject     TEXT NOT NULL,
    category    TEXT,
    status      TEXT NOT NULL CHECK (status IN ('new', 'open', 'pending', 'solved', 'closed')),
    priority    TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
    team_id     INTEGER REFERENCES teams(id),
    assignee_id INTEGER REFERENCES agents(id),
    tags        TEXT NOT NULL DEFAULT '',
    sla_due_at  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    merged_into INTEGER REFERENCES tickets(id)
);
CREATE INDEX tickets_customer ON tickets(customer_id);
CREATE INDEX tickets_status ON tickets(status);

CREATE TABLE ticket_messages (
    id          INTEGER PRIMARY KEY,
    ticket_id   INTEGER NOT NULL REFERENCES tickets(id),
    author_type TEXT NOT NULL CHECK (author_type IN ('customer', 'agent', 'system')),
    author_id   INTEGER,
    public      INTEGER NOT NULL CHECK (public IN (0, 1)),
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX ticket_messages_ticket ON ticket_messages(ticket_id);

CREATE TABLE approvals (
    id           INTEGER PRIMARY KEY,
    order_id     INTEGER NOT NULL REFERENCES orders(id),
    amount_cents INTEGER NOT NULL,
    reason       TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('approved', 'denied')),
    decided_by   INTEGER REFERENCES agents(id),
    note         TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX approvals_order ON approvals(order_id);

CREATE TABLE refunds (
    id              INTEGER PRIMARY KEY,
    order_id        INTEGER NOT NULL REFERENCES orders(id),
    order_line_id   INTEGER REFERENCES order_lines(id),
    amount_cents    INTEGER NOT NULL CHECK (amount_cents > 0),
    reason          TEXT NOT NULL,
    approval_id     INTEGER REFERENCES approvals(id),
    override_reason TEXT,
    created_at      TEXT NOT NULL
);
CREATE INDEX refunds_order ON refunds(order_id);

CREATE TABLE identity_checks (
    id          INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    passed      INTEGER NOT NULL CHECK (passed IN (0, 1)),
    created_at  TEXT NOT NULL
);
CREATE INDEX identity_checks_customer ON identity_checks(customer_id);

CREATE TABLE articles (
    id         INTEGER PRIMARY KEY,
    title      TEXT NOT NULL,
    category   TEXT NOT NULL,
    body       TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
