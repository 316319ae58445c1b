//! The management operations: the applications list and one application.

use serde_json::json;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::SchemaFormat;
use utoipa::openapi::{ContentBuilder, KnownFormat, Ref, Required};

use super::errors::operation;
use super::parts::{integer, request_id_header};
use crate::auth::READ_SCOPE;

/// What both answers say of the fields.
const FIELDS: &str = "The fields are those of the original API that an export's dataset can fill; \
`create_date` is absent when neither `applications.toml` nor a date folder gives one.";

pub(super) fn applications_operation() -> Operation {
    let ok = ResponseBuilder::new()
        .description(format!(
            "The applications the token may read, ascending by id: those described in the dataset's \
             `applications.toml` and those with data. An application without a description is named \
             by its id, in `UTC`. {FIELDS}"
        ))
        .content(
            "application/json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("ApplicationList"))).build(),
        )
        .header("x-request-id", request_id_header())
        .build();
    operation(
        "management",
        "listApplications",
        "List the applications",
        &format!(
            "The applications this token may read. Needs the scope `{READ_SCOPE}`; takes no parameters."
        ),
        &["400", "401", "403", "414", "429", "431", "500", "503"],
    )
    .response("200", ok)
    .build()
}

pub(super) fn application_operation() -> Operation {
    let ok = ResponseBuilder::new()
        .description(format!("The application, as the list shows it. {FIELDS}"))
        .content(
            "application/json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("ApplicationAnswer"))).build(),
        )
        .header("x-request-id", request_id_header())
        .build();
    let id = ParameterBuilder::new()
        .name("id")
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some("The application's id; anything but an integer is 400."))
        .schema(Some(
            integer(Some(i64::MIN), Some(i64::MAX))
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64))),
        ))
        .example(Some(json!(1001)))
        .build();
    operation(
        "management",
        "getApplication",
        "One application",
        &format!(
            "Needs the scope `{READ_SCOPE}` and the application among the token's: an application \
             outside them is 403 whether it exists or not, as in the export; 404 `not_found` says \
             that an application the token could read does not exist."
        ),
        &["400", "401", "403", "404", "414", "429", "431", "500", "503"],
    )
    .parameter(id)
    .response("200", ok)
    .build()
}
