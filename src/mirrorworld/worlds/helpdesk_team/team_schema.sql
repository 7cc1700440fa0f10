-- Helpdesk team: what the parties of one contact say and hand to each other.
-- Created after the helpdesk schema (schema.sql of the helpdesk world), which it extends.

-- Every hand-off is a row: a question to the customer and the customer's reply,
-- an approval request and the supervisor's decision, a transfer to tier 2 with
-- its summary, a change the customer is asked to confirm and the confirmation.
CREATE TABLE team_messages (
    id         INTEGER PRIMARY KEY,
    ticket_id  INTEGER NOT NULL REFERENCES tickets(id),
    kind       TEXT NOT NULL CHECK (kind IN ('question', 'reply', 'confirmation_request', 'confirmation',
                                             'approval_request', 'approval_decision', 'transfer', 'left')),
    sender     TEXT NOT NULL CHECK (sender IN ('customer', 'tier1', 'supervisor', 'tier2')),
    recipient  TEXT NOT NULL CHECK (recipient IN ('customer', 'tier1', 'supervisor', 'tier2')),
    topic      TEXT,
    ref_id     INTEGER,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX team_messages_ticket ON team_messages(ticket_id);
CREATE INDEX team_messages_recipient ON team_messages(recipient);

CREATE TABLE approval_requests (
    id           INTEGER PRIMARY KEY,
    ticket_id    INTEGER NOT NULL REFERENCES tickets(id),
    order_id     INTEGER NOT NULL REFERENCES orders(id),
    line_id      INTEGER NOT NULL REFERENCES order_lines(id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    reason       TEXT NOT NULL,
    summary      TEXT NOT NULL,
    requested_by TEXT NOT NULL CHECK (requested_by IN ('tier1', 'tier2')),
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied')),
    approval_id  INTEGER REFERENCES approvals(id),
    note         TEXT,
    created_at   TEXT NOT NULL,
    decided_at   TEXT
);
CREATE INDEX approval_requests_order ON approval_requests(order_id);
-- Child keys: inserting a ticket or an approval looks up the requests that refer to it.
CREATE INDEX approval_requests_ticket ON approval_requests(ticket_id);
CREATE INDEX approval_requests_approval ON approval_requests(approval_id);

CREATE TABLE verification_codes (
    id          INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    email       TEXT NOT NULL,
    code        TEXT NOT NULL,          -- customer-private: only the customer's mailbox shows it
    used        INTEGER NOT NULL DEFAULT 0 CHECK (used IN (0, 1)),
    created_at  TEXT NOT NULL
);
CREATE INDEX verification_codes_customer ON verification_codes(customer_id);

CREATE TABLE account_changes (
    id          INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    ticket_id   INTEGER NOT NULL REFERENCES tickets(id),
    field       TEXT NOT NULL CHECK (field IN ('email', 'phone', 'address')),
    new_value   TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'confirmed', 'declined')),
    created_at  TEXT NOT NULL,
    decided_at  TEXT
);
CREATE INDEX account_changes_customer ON account_changes(customer_id);
CREATE INDEX account_changes_ticket ON account_changes(ticket_id);
