// The session database's schema: one migration function per PRAGMA user_version, applied in order
// inside one transaction when a database is opened. A database from a newer FlashDesk is refused
// (never modified), so a downgrade cannot destroy data it does not understand.
#pragma once

#include <cstdint>

namespace flashdesk::storage {

class Database;

// The version this build writes. Bump it by adding migrate_to_vN beside the others, never by
// editing an old one: users' files were made by the old code.
inline constexpr int64_t kSchemaVersion = 3;

// Brings the database to kSchemaVersion. Throws FormatError when the file's version is newer.
void migrate(Database& db);

int64_t schema_version(Database& db);

}  // namespace flashdesk::storage
