-- Helpdesk: the contact center of an online retailer.
-- Money is stored in integer cents; times are ISO 8601 UTC text.
-- A CHECK on a set of more than two values is spelled as comparisons, not IN (...): SQLite builds a
-- temporary b-tree for such an IN list each time a row is written, a quarter of what a task's setup
-- insert costs.

CREATE TABLE customers (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    email         TEXT NOT NULL UNIQUE,
    phone         TEXT NOT NULL,
    address       TEXT NOT NULL,
    city          TEXT NOT NULL,
    zip           TEXT NOT NULL,
    tier          TEXT NOT NULL CHECK (tier = 'standard' OR tier = 'gold' OR tier = 'platinum'),
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
    status           TEXT NOT NULL CHECK (status = 'placed' OR status = 'shipped' OR status = 'delivered' OR status = 'cancelled' OR status = 'refunded'),
    placed_at        TEXT NOT NULL,
    shipped_at       TEXT,
    delivered_at     TEXT,
    total_cents      INTEGER NOT NULL,
    shipping_address TEXT NOT NULL
);
-- list_orders: a customer's orders, newest first, read in index order.
CREATE INDEX orders_customer ON orders(customer_id, placed_at);

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
    channel     TEXT NOT NULL CHECK (channel = 'email' OR channel = 'chat' OR channel = 'phone' OR channel = 'web'),
    subject     TEXT NOT NULL,
    category    TEXT,
    status      TEXT NOT NULL CHECK (status = 'new' OR status = 'open' OR status = 'pending' OR status = 'solved' OR status = 'closed'),
    priority    TEXT NOT NULL CHECK (priority = 'low' OR priority = 'normal' OR priority = 'high' OR priority = 'urgent'),
    team_id     INTEGER REFERENCES teams(id),
    assignee_id INTEGER REFERENCES agents(id),
    tags        TEXT NOT NULL DEFAULT '',
    sla_due_at  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    merged_into INTEGER REFERENCES tickets(id)
);
-- search_tickets reads each of these in its own order (newest first) and stops at its limit:
-- by customer, by status, and by subject (then status) for a text search (see tools.search_tickets).
CREATE INDEX tickets_customer ON tickets(customer_id, created_at, id);
CREATE INDEX tickets_status ON tickets(status, created_at, id);
CREATE INDEX tickets_subject ON tickets(subject, status, created_at, id);
-- The child key of the self-reference: inserting a ticket looks its would-be children up.
CREATE INDEX tickets_merged_into ON tickets(merged_into);

CREATE TABLE ticket_messages (
    id          INTEGER PRIMARY KEY,
    ticket_id   INTEGER NOT NULL REFERENCES tickets(id),
    author_type TEXT NOT NULL CHECK (author_type = 'customer' OR author_type = 'agent' OR author_type = 'system'),
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
-- An approval used by a refund (issue_refund), and the child key checked when an approval is inserted.
CREATE INDEX refunds_approval ON refunds(approval_id);

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

-- Text search, derived from the tables above and kept exact by triggers (see tools.search_customers
-- and tools.search_tickets). Both tables are named mw_* so that the image neither tracks nor hashes
-- them: they are pure functions of tracked rows, written only by these triggers, inside the same
-- transaction (an episode's rollback and a refused call's rollback undo them with the rows they
-- derive from), and a session replaying rows onto a clone fires the same triggers.

-- Customers' name, email and phone as LIKE reads them (up to a NUL character, case folded by lower(),
-- which folds ASCII only, as LIKE does), each followed by a newline, which no search query contains (it
-- collapses whitespace): every two letters of a value then begin one of its three-letter tokens, so a
-- two-letter query is answered from the vocabulary and a longer one by a phrase query (see
-- tools.search_customers).
CREATE VIRTUAL TABLE mw_customer_search USING fts5(
    name, email, phone, content='', tokenize='trigram case_sensitive 1'
);
CREATE VIRTUAL TABLE mw_customer_search_terms USING fts5vocab(mw_customer_search, row);
CREATE TRIGGER customer_search_insert AFTER INSERT ON customers BEGIN
    INSERT INTO mw_customer_search (rowid, name, email, phone)
    VALUES (NEW.id, lower(substr(NEW.name, 1, instr(NEW.name || char(0), char(0)) - 1)) || char(10), lower(substr(NEW.email, 1, instr(NEW.email || char(0), char(0)) - 1)) || char(10), lower(substr(NEW.phone, 1, instr(NEW.phone || char(0), char(0)) - 1)) || char(10));
END;
CREATE TRIGGER customer_search_delete AFTER DELETE ON customers BEGIN
    INSERT INTO mw_customer_search (mw_customer_search, rowid, name, email, phone)
    VALUES ('delete', OLD.id, lower(substr(OLD.name, 1, instr(OLD.name || char(0), char(0)) - 1)) || char(10), lower(substr(OLD.email, 1, instr(OLD.email || char(0), char(0)) - 1)) || char(10), lower(substr(OLD.phone, 1, instr(OLD.phone || char(0), char(0)) - 1)) || char(10));
END;
CREATE TRIGGER customer_search_update AFTER UPDATE OF id, name, email, phone ON customers BEGIN
    INSERT INTO mw_customer_search (mw_customer_search, rowid, name, email, phone)
    VALUES ('delete', OLD.id, lower(substr(OLD.name, 1, instr(OLD.name || char(0), char(0)) - 1)) || char(10), lower(substr(OLD.email, 1, instr(OLD.email || char(0), char(0)) - 1)) || char(10), lower(substr(OLD.phone, 1, instr(OLD.phone || char(0), char(0)) - 1)) || char(10));
    INSERT INTO mw_customer_search (rowid, name, email, phone)
    VALUES (NEW.id, lower(substr(NEW.name, 1, instr(NEW.name || char(0), char(0)) - 1)) || char(10), lower(substr(NEW.email, 1, instr(NEW.email || char(0), char(0)) - 1)) || char(10), lower(substr(NEW.phone, 1, instr(NEW.phone || char(0), char(0)) - 1)) || char(10));
END;

-- Every subject a ticket has had: a search matches its text against these (a handful of templates
-- and the subjects tasks add, however large the world), then reads each matching subject's tickets
-- through tickets_subject. A subject no ticket has any more only costs an empty lookup.
CREATE TABLE mw_ticket_subjects (subject TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TRIGGER ticket_subject_insert AFTER INSERT ON tickets BEGIN
    INSERT OR IGNORE INTO mw_ticket_subjects VALUES (NEW.subject);
END;
CREATE TRIGGER ticket_subject_update AFTER UPDATE OF subject ON tickets BEGIN
    INSERT OR IGNORE INTO mw_ticket_subjects VALUES (NEW.subject);
END;
