# kiln_add_bundle(NAME MODEL model.onnx [ARGS flags...] [OUTPUT file.kiln]
#                 [DEPENDS files...])
#
# Compiles MODEL with kilnc (its flags ARGS) into OUTPUT (default
# NAME.kiln in the current binary directory) as a build step, and adds the
# target NAME that builds it. kilnc runs again when the model, a file of
# DEPENDS (an external-data file, a --trainable list), kilnc itself or the
# flags change; the flags are kept in NAME.kilnc-args, rewritten only when
# they differ. Bundles are byte-identical for the same inputs and flags.
function(kiln_add_bundle name)
  cmake_parse_arguments(PARSE_ARGV 1 KILN "" "MODEL;OUTPUT" "ARGS;DEPENDS")
  if(NOT KILN_MODEL)
    message(FATAL_ERROR "kiln_add_bundle(${name}): MODEL is required")
  endif()
  if(NOT Kiln_KILNC)
    message(FATAL_ERROR "kiln_add_bundle(${name}): this Kiln installation "
                        "has no kilnc (install the kiln-tools package)")
  endif()
  get_filename_component(model "${KILN_MODEL}" ABSOLUTE)
  if(NOT KILN_OUTPUT)
    set(KILN_OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/${name}.kiln")
  endif()
  get_filename_component(output "${KILN_OUTPUT}" ABSOLUTE
    BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  set(args_file "${CMAKE_CURRENT_BINARY_DIR}/${name}.kilnc-args")
  string(REPLACE ";" "\n" args_text "${KILN_ARGS}")
  file(CONFIGURE OUTPUT "${args_file}" CONTENT "${args_text}\n")
  add_custom_command(OUTPUT "${output}"
    COMMAND Kiln::kilnc "${model}" ${KILN_ARGS} -o "${output}"
    DEPENDS "${model}" ${KILN_DEPENDS} "${args_file}" "${Kiln_KILNC}"
    COMMENT "Compiling ${KILN_MODEL} with kilnc into ${name}.kiln"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS "${output}")
  set_target_properties(${name} PROPERTIES KILN_BUNDLE "${output}")
endfunction()
